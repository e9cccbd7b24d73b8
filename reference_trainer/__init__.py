"""reference_trainer: a compact PyTorch + transformers trainer for multi-turn text envs.

Token-PPO, Turn-PPO, S-PPO, ST-PPO and GRPO on any Gymnasium env that keeps the turn contract,
token-in/token-out. Start with ``python -m reference_trainer train --help``; the formulas are in
``docs/algorithms.md``. Modules, in the order data flows through them:

* :mod:`.tiny` builds a small model and tokenizer offline; :mod:`.policy` loads any local
  checkpoint and adds the value head;
* :mod:`agentgym_turn.tokens` (the env suite's) assembles conversations token by token; :mod:`.rollout` plays batched
  multi-turn episodes;
* :mod:`.advantages` and :mod:`.losses` are the math, as pure functions, each with a registry
  the loop looks its estimator and loss terms up in;
* :mod:`.trainer` is the loop (one iteration reads top to bottom there and in those two);
  :mod:`.checkpoint` saves and restores it; :mod:`.config` and :mod:`.cli` configure it.

Importing this package imports nothing heavy; the submodules need the ``train`` extra.
"""
