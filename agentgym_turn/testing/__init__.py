"""Check any text env against the turn contract.

* :func:`check_turn_env` (no extra dependency): one call, every violation reported once.
* :func:`check_text_aec_env`: PettingZoo's AEC API checks for text multi-agent envs.
* ``agentgym_turn.testing.strategies``: hypothesis strategies for adversarial responses.
* ``agentgym_turn.testing.stateful``: a hypothesis state machine that plays whole episodes.
* ``agentgym_turn.testing.linearity``: work counters showing a parser is linear, no clock.

The last three need ``hypothesis`` (the ``dev`` extra) only where they import it.
"""

from .aec import AECReport, check_text_aec_env
from .checker import CheckReport, TurnContractError, Violation, check_turn_env
from .fuzz import fixed_adversarial_responses, random_responses

__all__ = [
    "AECReport",
    "check_text_aec_env",
    "CheckReport",
    "TurnContractError",
    "Violation",
    "check_turn_env",
    "fixed_adversarial_responses",
    "random_responses",
]
