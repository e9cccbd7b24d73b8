"""benchmarks/repeat_test.py counts the passes of a test run again and again beside busy processes."""

from __future__ import annotations

import json

from benchmarks import repeat_test


def test_it_counts_passes_and_failures_of_fresh_runs_under_load(tmp_path):
    (tmp_path / "test_planted.py").write_text(
        "import os\n\ndef test_passes():\n    assert True\n\n"
        "def test_fails_on_the_second_run():\n"
        f"    marker = {str(tmp_path / 'ran')!r}\n"
        "    first = not os.path.exists(marker)\n    open(marker, 'a').close()\n    assert first\n"
    )
    out = tmp_path / "result.json"
    good = repeat_test.main(
        [f"{tmp_path}/test_planted.py::test_passes", "--times", "2", "--load", "1", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert good == 0 and result["passed"] == 2 and result["all_passed"] and result["load_processes"] == 1
    bad = repeat_test.main(
        [f"{tmp_path}/test_planted.py::test_fails_on_the_second_run", "--times", "2", "--load", "0", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert (
        bad == 1
        and [r["passed"] for r in result["runs"]] == [True, False]
        and "assert first" in result["runs"][1]["tail"]
    )
    assert "| test_fails_on_the_second_run | 2 | 1 |" in repeat_test.markdown(result)
