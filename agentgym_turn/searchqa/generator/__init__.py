"""Search QA's generated tasks: a seeded fictional knowledge base and questions over it.

* :mod:`.names` – coined words for fictional names (no real entity leaks an answer);
* :mod:`.world` – :func:`generate_world`, the knowledge base (people, places, works, organisations);
* :mod:`.questions` – single-hop, bridge and comparison questions with oracle search plans and splits.

The passages a world renders into live in :mod:`agentgym_turn.searchqa.corpus`, which reads
:mod:`.world` while :mod:`.questions` reads the rendered corpus; so names below load their module
on first use, and importing :mod:`.world` does not import :mod:`.questions`.
"""

from ...core.exports import lazy_exports

_EXPORTS = {
    "World": ".world",
    "WorldConfig": ".world",
    "generate_world": ".world",
    "SPLITS": ".questions",
    "Question": ".questions",
    "generate_questions": ".questions",
    "split_questions": ".questions",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
