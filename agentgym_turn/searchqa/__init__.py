"""TurnSearchQA: multi-turn search-then-answer (Search-R1's protocol) over a generated or loaded corpus.

Modules, each one concept:

* :mod:`.names`: coined words for fictional names; :mod:`.world`: the seeded knowledge base;
  :mod:`.corpus`: passages (wiki-18 jsonl format) and the rendering of a world into them;
  :mod:`.questions`: single-hop, bridge and comparison questions with oracle search plans and splits;
* :mod:`.normalize`: Search-R1's answer normalisation, exact match, token F1, option letters;
* :mod:`.retrieval`: BM25, dense and HTTP retrievers, Search-R1's ``<information>`` format;
* :mod:`.server`: the ``/retrieve`` server (``agentgym-turn serve retriever``);
* :mod:`.datasets`: FlashRAG jsonl loader and the export of a generated world;
* :mod:`.sources`: per-process cache of worlds, corpora and indexes;
* :mod:`.env`: ``TurnSearchQA-v0`` and ``TurnSearchQA-MCQ-v0``.

Importing this package loads nothing heavy; BM25 (bm25s, numba) loads when an index is built.
"""
