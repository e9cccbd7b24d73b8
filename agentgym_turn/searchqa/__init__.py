"""TurnSearchQA: multi-turn search-then-answer (Search-R1's protocol) over a generated or loaded corpus.

Modules, each one concept:

* :mod:`.generator`: the seeded knowledge base (``world``, coined ``names``) and its ``questions``
  (single-hop, bridge, comparison) with oracle search plans and splits;
* :mod:`.loader`: FlashRAG jsonl / Search-R1 parquet datasets and the export of a generated world;
* :mod:`.reward`: Search-R1's answer normalisation, exact match, token F1, option letters;
* :mod:`.expert`: the oracle searcher;
* :mod:`.corpus`: passages (wiki-18 jsonl format) and the rendering of a world into them;
* :mod:`.retrieval`: BM25, dense and HTTP retrievers; :mod:`.protocol`: Search-R1's tags and blocks;
* :mod:`.server`: the ``/retrieve`` server (``agentgym-turn serve retriever``);
* :mod:`.source`: where questions and passages come from (a generated world or files), cached per process;
* :mod:`.env`: :class:`TurnSearchQAEnv` (``TurnSearchQA-v0``) and :class:`TurnSearchQAMCQEnv`
  (``TurnSearchQA-MCQ-v0``).

Importing this package loads nothing heavy; names below load their module on first use, and
BM25 (bm25s, numba) loads when an index is built.
"""

from ..core.exports import lazy_exports

_EXPORTS = {
    "TurnSearchQAEnv": ".env",
    "TurnSearchQAMCQEnv": ".env",
    "Question": ".generator",
    "WorldConfig": ".generator",
    "generate_world": ".generator",
    "generate_questions": ".generator",
    "load_questions": ".loader",
    "export_world": ".loader",
    "exact_match": ".reward",
    "token_f1": ".reward",
    "normalize_answer": ".reward",
    "Corpus": ".corpus",
    "generated_source": ".source",
    "QuestionSource": ".source",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
