"""The trainer on a real pretrained chat model: SmolLM2-135M-Instruct (``--model smollm2-135m-instruct``) on TurnSokoban-v0, on CPU.

One Turn-PPO iteration through the public :class:`~reference_trainer.trainer.Trainer` API (rollout of two tasks, update,
checkpoint), then a run resumed from the checkpoint for one more iteration; and ``eval --model smollm2-135m-instruct`` from
the command line. The model is named, not given as a directory, so the trainer resolves the name as a user's run does.
"""

from __future__ import annotations

import math

import pytest
import torch

from support.real_model import NAME, smollm2_dir, smollm2_tokenizer
from reference_trainer import checkpoint
from reference_trainer.config import preset
from reference_trainer.policy import load_policy
from reference_trainer.tasks import rl_task_seeds
from agentgym_turn.tokens import ChatFormat
from reference_trainer.trainer import Trainer

pytestmark = pytest.mark.slow

#: SmolLM2's tokenizer: the first TurnSokoban-v0 message is 358 tokens (SmolLM2's default system message included),
#: each later state 92, so 512 holds two turns of 16 new tokens and the context cuts every episode there.
MAX_NEW_TOKENS = 16
MAX_CONTEXT_TOKENS = 512
FIRST_MESSAGE_TOKENS = 358


@pytest.fixture(scope="module")
def model_dir():
    return smollm2_dir()  # converted once into the user cache (about a minute the first time)


def _config(out, **train):
    return preset(
        "turn-ppo",
        model=NAME,
        env="TurnSokoban-v0",
        tasks_per_iteration=2,
        num_envs=2,
        max_new_tokens=MAX_NEW_TOKENS,
        max_context_tokens=MAX_CONTEXT_TOKENS,
        minibatch_size=2,
        lr=1e-5,
        sft_episodes=0,
        iterations=2,
        eval_every=0,
        eval_episodes=1,
        out=str(out),
        progress=False,
        **train,
    )


def _spy(trainer):
    """Record the episodes the trainer's rollouts return and the actions its envs receive (``{env index: text}`` per step)."""
    episodes, received = [], []
    rollout, step = trainer.rollout, trainer.envs.step

    def spied_rollout(*args, **kwargs):
        out = rollout(*args, **kwargs)
        episodes.extend(out)
        return out

    def spied_step(actions):
        received.append(dict(actions))
        return step(actions)

    trainer.rollout, trainer.envs.step = spied_rollout, spied_step
    return episodes, received


def _finite_losses(metrics):
    """Whether the update's losses and statistics are finite (the explained variance is NaN where the value targets of
    the batch are all equal, as two one-turn episodes with the same reward make them)."""
    train = {k: v for k, v in metrics.items() if k.startswith("train/") and k != "train/explained_variance"}
    return {"train/pg_loss", "train/vf_loss", "train/entropy", "train/grad_norm"} <= set(train) and all(
        map(math.isfinite, train.values())
    )


def test_one_turn_ppo_iteration_of_smollm2_on_sokoban_checkpoints_and_resumes(model_dir, tmp_path):
    tr = Trainer(_config(tmp_path / "run"))
    assert tr.model_path == model_dir  # the name resolved to the converted checkpoint
    assert type(tr.policy.lm).__name__ == "LlamaForCausalLM" and len(tr.tokenizer) == 49152
    episodes, received = _spy(tr)
    before = {k: p.detach().clone() for k, p in tr.policy.lm.named_parameters()}

    m = tr.train_iteration()

    assert tr.iteration == 1 and m["rollout/episodes"] == 2
    assert _finite_losses(m) and m["train/grad_norm"] > 0, m
    # the rollout: the first message is the prompt's exact pieces, and each response's sampled ids decode to the text
    # its env received; an episode ends by the env or by the context
    fmt = ChatFormat(smollm2_tokenizer())
    assert len(episodes) == 2
    for index, ep in enumerate(episodes):
        conv = ep.conversation
        first = [i for ids, _ in fmt.prompt_pieces(conv.observations[0]) for i in ids]
        assert len(first) == FIRST_MESSAGE_TOKENS and conv.ids[: len(first)] == first
        sent = [r[index] for r in received if index in r]
        texts = [fmt.decode_response(conv.ids[a:b]) for a, b in conv.action_spans]
        assert 1 <= len(texts) <= 2 and texts == sent == conv.responses, (texts, sent)
        assert all(0 < b - a <= MAX_NEW_TOKENS for a, b in conv.action_spans)
        assert ep.terminated or ep.truncation in ("context", "env")
    # the update moved the actor
    after = dict(tr.policy.lm.named_parameters())
    changed = [k for k, p in before.items() if not torch.equal(p, after[k])]
    assert len(changed) > len(before) // 2, f"{len(changed)} of {len(before)} actor tensors changed"
    del before

    path = tr.save_checkpoint(tmp_path / "ckpt")
    saved_dir = checkpoint.resolve(path) / "policy"
    policy, tokenizer = load_policy(saved_dir)
    assert len(tokenizer) == 49152 and "<|im_start|>" in tokenizer.chat_template
    assert tokenizer.chat_template == smollm2_tokenizer().chat_template
    assert tokenizer("Left || Up")["input_ids"] == smollm2_tokenizer()("Left || Up")["input_ids"]
    saved = dict(policy.named_parameters())
    assert all(torch.equal(p, saved[k]) for k, p in tr.policy.named_parameters())
    adam = {k: v["exp_avg"].clone() for k, v in enumerate(tr.optimizer.state.values())}
    numpy_state, sampling_state = tr.np_rng.bit_generator.state, tr.generator.get_state().clone()
    tr.close()
    del tr, policy

    resumed = Trainer(_config(tmp_path / "resumed", resume=str(path)))
    assert resumed.iteration == 1 and resumed.model_path == saved_dir
    assert all(torch.equal(p, saved[k]) for k, p in resumed.policy.named_parameters())
    assert all(torch.equal(adam[k], v["exp_avg"]) for k, v in enumerate(resumed.optimizer.state.values()))
    assert resumed.np_rng.bit_generator.state == numpy_state and torch.equal(
        resumed.generator.get_state(), sampling_state
    )
    m2 = resumed.train_iteration()
    assert resumed.iteration == 2 and m2["rollout/episodes"] == 2
    assert _finite_losses(m2), m2
    # the resumed run plays the second iteration's tasks of the run it continues
    t = resumed.cfg.train
    assert resumed.played_tasks == rl_task_seeds(t.seed, t.eval_seed, 2, 2)[2:]
    resumed.close()


def test_eval_of_the_named_model_from_the_command_line(model_dir, tmp_path, capsys):
    from reference_trainer.cli import main

    assert (
        main(
            [
                "eval",
                "--model",
                NAME,
                "--env",
                "TurnSokoban-v0",
                "--eval-episodes",
                "1",
                "--max-new-tokens",
                str(MAX_NEW_TOKENS),
                "--max-context-tokens",
                str(MAX_CONTEXT_TOKENS),
                "--num-envs",
                "1",
                "--out",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "held-out: success" in out and "(1 episodes)" in out, out
