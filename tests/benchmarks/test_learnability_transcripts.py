"""benchmarks/learnability_transcripts.py: how each sampled episode of a climb's start ended."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks.learnability_transcripts import _search_query, ending


def _episode(success=False, terminated=False, truncation=None, prediction=""):
    return SimpleNamespace(
        success=success, terminated=terminated, truncation=truncation, infos=[{"prediction": prediction}]
    )


@pytest.mark.parametrize(
    "episode, kind",
    [
        (_episode(success=True, terminated=True, prediction="B"), "solved"),
        (_episode(terminated=True, prediction=" C "), "wrong option"),
        (_episode(terminated=True, prediction="1847"), "not an option"),
        (_episode(terminated=True, prediction=""), "not an option"),
        (_episode(truncation="env"), "turn limit"),
        (_episode(truncation="context"), "context"),
        (_episode(), "other"),
    ],
)
def test_each_ending_is_named(episode, kind):
    assert ending(episode, ("A", "B", "C", "D")) == kind


def test_the_first_search_query_is_read_from_the_response():
    assert _search_query("<think>who?</think>\n<search>  Bank of   Jolblam </search>") == "bank of jolblam"
    assert _search_query("<answer> A </answer>") is None
