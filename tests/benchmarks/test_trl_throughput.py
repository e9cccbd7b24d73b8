"""benchmarks/trl_throughput.py's rows, medians and table on made-up steps (the run itself is a benchmark)."""

from benchmarks import trl_throughput


def test_rows_medians_and_the_table():
    row = trl_throughput._row(10.0, 30.0, 16, 500, 4000)
    assert (
        row["episodes_per_hour"] == 3600 * 16 / 40
        and row["rollout_tokens_per_s"] == 50
        and row["update_tokens_per_s"] == 4000 / 30
    )
    result = {
        "median": {
            "reference": {"episodes_per_hour": 1440.0, "rollout_tokens_per_s": 50.0, "update_tokens_per_s": 133.3},
            "trl": {"episodes_per_hour": 720.0, "rollout_tokens_per_s": 25.0, "update_tokens_per_s": 133.3},
        },
        "ratio_reference_over_trl": {"episodes_per_hour": 2.0, "rollout_tokens_per_s": 2.0, "update_tokens_per_s": 1.0},
    }
    table = trl_throughput.markdown(result)
    assert (
        "| episodes per hour | 1440.0 | 720.0 | 2.00 |" in table
        and "| update tokens/s (whole sequences) | 133.3 | 133.3 | 1.00 |" in table
    )
