"""benchmarks/soak.py for 20 seconds: both servers under churn (dropped, silent and half-open sessions, bodies cut
short) end with no live session after the idle timeout, no client error and no traceback in their logs. The memory
slope needs the 30-minute run (docs/security.md); here it is only reported."""

from __future__ import annotations

import json
import math

from benchmarks import common
from benchmarks.soak import SCENARIOS, main, markdown
from support.paths import ROOT


def test_churn_leaves_no_session_no_error_and_no_traceback(tmp_path):
    out = tmp_path / "soak.json"
    assert main(["--seconds", "20", "--clients", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["scenarios"]) == set(SCENARIOS)  # every kind of churn was played
    for name, server in result["servers"].items():
        assert server["sessions"] > 100, name
        assert server["live_sessions_after_drain"] == 0, name
        assert server["client_errors"] == 0, (name, server["error_examples"])
        assert server["server_tracebacks"] == 0, name
        assert server["slope_mb_per_1000_sessions"] is None or math.isfinite(server["slope_mb_per_1000_sessions"])


def test_the_committed_30_minute_soak_is_the_table_in_the_docs_and_holds_its_bounds():
    result = json.loads((common.RESULTS / "soak.json").read_text())
    assert markdown(result) in (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    assert result["seconds"] >= 1800
    for name, server in result["servers"].items():
        assert server["live_sessions_after_drain"] == server["client_errors"] == server["server_tracebacks"] == 0, name
        assert server["slope_mb_per_1000_sessions"] < 0.2, name


class _QuietClient:
    """A websocket whose server already closed the session as idle, last heard from ``quiet`` seconds ago."""

    def __init__(self, quiet: float):
        import time

        self.soak_last_frame = time.monotonic() - quiet

    def send(self, text):
        raise ConnectionError("received 1001 (going away) idle for more than 4 s")


def test_a_session_closed_because_the_client_itself_went_quiet_is_not_a_server_error():
    import pytest

    from benchmarks import soak

    with pytest.raises(soak.ClientIdled):
        soak.frame(_QuietClient(soak.IDLE_TIMEOUT_S + 1), "step", {})
    with pytest.raises(ConnectionError):  # closed as idle although the client spoke within the timeout: an error
        soak.frame(_QuietClient(0.1), "step", {})
