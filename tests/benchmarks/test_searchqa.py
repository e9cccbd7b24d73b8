"""benchmarks/searchqa.py runs end to end on a tiny corpus (so the recorded numbers stay reproducible)."""

import json

from benchmarks import searchqa


def test_searchqa_benchmark__smoke_run_writes_every_measurement(tmp_path):
    out = tmp_path / "searchqa.json"
    assert (
        searchqa.main(
            [
                "--sizes",
                "3000",
                "--queries",
                "40",
                "--episodes",
                "20",
                "--first-query-scale",
                "0.3",
                "--parser-repeats",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    size = result["retrieval"][0]
    assert 2500 <= size["passages"] <= 3500 and size["queries"] == 40
    assert size["http_same_results_as_in_process"] is True
    for key in ("in_process", "raw_bm25s", "http"):
        assert 0 < size[key]["p50_ms"] <= size[key]["p95_ms"]
    env = result["env"]
    # The expert's episodes take 1 to 5 turns each, and the same turns over HTTP as in process.
    assert env["episodes"] == 20 and 20 <= env["steps"] <= 100 and env["steps_http"] == env["steps"]
    assert env["steps_per_s_in_process"] > 0 and env["steps_per_s_http"] > 0
    first = result["first_query"]
    assert first["with_warmup"]["warmup_at_build"] and not first["without_warmup"]["warmup_at_build"]
    assert all(first[k]["first_query_ms"] > 0 and first[k]["later_query_p50_ms"] > 0 for k in first)
    parsers = result["parsers_worst_case_step_s"]
    assert set(parsers["mcq_search_r1"]) == set(searchqa.WORST_CASES) and parsers["response_chars"][-1] == 65_536
    assert max(parsers["response_chars"]) <= 65_536 and parsers["max_step_s"] > 0
