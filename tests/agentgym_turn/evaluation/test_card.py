"""The card's intervals against hand-computed cases, and for any counts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.evaluation import mean_interval, summarize, wilson_interval


def test_wilson_interval__hand_computed():
    # 3 of 10, z = 1.96: centre (0.3 + 0.19208) / 1.38416 = 0.35557; half 1.96 * sqrt(0.021 + 0.009604) / 1.38416 = 0.24773.
    low, high = wilson_interval(3, 10)
    assert low == pytest.approx(0.10779, abs=1e-4) and high == pytest.approx(0.60322, abs=1e-4)
    assert wilson_interval(0, 8)[0] == 0.0 and wilson_interval(0, 8)[1] == pytest.approx(0.32441, abs=1e-4)


def test_mean_interval__hand_computed():
    # values 1, 2, 3, 4: mean 2.5, s^2 = 5/3, half = 1.959964 * sqrt(5/12) = 1.26515.
    mean, low, high = mean_interval([1.0, 2.0, 3.0, 4.0])
    assert (
        mean == 2.5 and low == pytest.approx(2.5 - 1.26515, abs=1e-5) and high == pytest.approx(2.5 + 1.26515, abs=1e-5)
    )


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_interval__inside_unit_interval_and_around_the_rate(k, n):
    k = min(k, n)
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n + 1e-12 and k / n - 1e-12 <= high <= 1.0


def test_summarize__infra_errors_are_left_out_of_every_mean():
    def record(success, score, statuses, status="ok", tokens=(5,)):
        return {
            "success": success,
            "score": score,
            "rewards": [score],
            "actions": ["x"] * len(statuses),
            "exit_statuses": statuses,
            "eval": {"status": status, "completion_tokens": list(tokens)},
        }

    m = summarize(
        [
            record(True, 1.0, ["ok"]),
            record(False, 0.0, ["invalid_action", "ok"]),
            record(False, 0.0, ["ok"], status="infra_error", tokens=(99,)),
        ]
    )
    assert (m["episodes"], m["scored"], m["infra_errors"]) == (3, 2, 1)
    assert m["success"]["mean"] == 0.5 and m["score"]["mean"] == 0.5
    assert m["invalid_format_rate"] == pytest.approx(1 / 3) and m["turns"] == 1.5 and m["completion_tokens"] == 5
    assert not math.isnan(m["score"]["low"])
