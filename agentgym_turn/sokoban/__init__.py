"""TurnSokoban: seeded, certified Sokoban levels and a text-turn env.

* :mod:`.generator` – gym-sokoban's generation method, seeded and certified.
* :mod:`.loader` – the :class:`Level` record and the Boxoban/XSB text format (user level files).
* :mod:`.source` – where an env's levels come from: :class:`SokobanGenerator` or :class:`LevelFile`.
* :mod:`.reward` – gym-sokoban's reward constants and the reward of a push.
* :mod:`.expert` – shortest plans from any state, and a resting move once none exists.
* :mod:`.board` – static geometry (dead squares, push distances) and the rules of play.
* :mod:`.solver` – the move-optimal A* solver.
* :mod:`.render` – text grids and RGB images.
* :mod:`.splits` – train, validation and test levels disjoint by content.
* :mod:`.ragen` – RAGEN's prompt and response parsing (``prompt_style="ragen"``).
* :mod:`.env` – :class:`TurnSokobanEnv`, registered as ``TurnSokoban-v0`` and variants.

Names below load their module on first use (``import agentgym_turn.sokoban`` is light).
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    "TurnSokobanEnv": ".env",
    "SokobanGenerator": ".source",
    "LevelFile": ".source",
    "Board": ".board",
    "board_for": ".board",
    "is_deadlocked": ".board",
    "GeneratedLevel": ".generator",
    "GenerationError": ".generator",
    "generate_level": ".generator",
    "Level": ".loader",
    "LevelFormatError": ".loader",
    "builtin_levels_path": ".loader",
    "load_levels": ".loader",
    "parse_level": ".loader",
    "parse_levels": ".loader",
    "SPLITS": ".splits",
    "level_split": ".splits",
    "SolveResult": ".solver",
    "replay": ".solver",
    "solve": ".solver",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
