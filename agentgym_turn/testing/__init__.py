"""Check any text env against the turn contract; hypothesis strategies live in ``.strategies``."""

from .checker import CheckReport, TurnContractError, check_turn_env
from .fuzz import fixed_adversarial_responses, random_responses

__all__ = ["CheckReport", "TurnContractError", "check_turn_env", "fixed_adversarial_responses", "random_responses"]
