"""Retrievers the search-QA server tests share: the generated world's BM25 retriever (a module-scoped
fixture: a test module registers it by importing it)."""

import pytest

from agentgym_turn.searchqa.source import generated_source, local_retriever


@pytest.fixture(scope="module")
def bm25():
    source = generated_source()
    return local_retriever(source.key, source.corpus, "bm25")
