"""The metric card of an evaluation: numbers computed from its record files alone, so anyone can recompute them.

Every number comes from ``records.jsonl`` (the model), ``expert.jsonl`` and ``random.jsonl`` (the floors, played on
the same tasks) and ``run.json`` (the settings). Episodes that ended as ``infra_error`` (the endpoint failed, not
the model) are counted apart and left out of every mean. Intervals are 95%: Wilson's score interval for the success
rate (it stays inside [0, 1] and is not empty at 0 or n successes), the normal interval ``mean +- 1.96 s / sqrt(n)``
for the score (docs/eval.md).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable

from ..core.files import file_sha256
from ..recording import read_records

CARD_FORMAT = "agentgym-turn/eval-card"
_Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``successes / n`` (``(0, 1)`` when ``n == 0``)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float], z: float = _Z95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the normal interval of a mean, ``mean +- z s / sqrt(n)`` (``s`` the sample standard deviation)."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    half = z * math.sqrt(var / n)
    return mean, mean - half, mean + half


def _status(record: dict[str, Any]) -> str:
    return str((record.get("eval") or {}).get("status", "ok"))


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Success, score, return, invalid-format rate, turns and tokens of a list of episode records (infra errors apart)."""
    records = list(records)
    scored = [r for r in records if _status(r) != "infra_error"]
    n = len(scored)
    wins = sum(1 for r in scored if r.get("success"))
    low, high = wilson_interval(wins, n)
    score_mean, score_low, score_high = mean_interval([float(r.get("score") or 0.0) for r in scored])
    turns = sum(len(r.get("actions", [])) for r in scored)
    invalid = sum(1 for r in scored for s in r.get("exit_statuses", []) if s == "invalid_action")
    tokens = [sum((r.get("eval") or {}).get("completion_tokens") or []) for r in scored]
    return {
        "episodes": len(records),
        "scored": n,
        "infra_errors": len(records) - n,
        "success": {
            "mean": wins / n if n else 0.0,
            "low": low,
            "high": high,
            "successes": wins,
            "interval": "wilson 95%",
        },
        "score": {"mean": score_mean, "low": score_low, "high": score_high, "interval": "normal 95%"},
        "return": sum(sum(r.get("rewards", [])) for r in scored) / n if n else 0.0,
        "invalid_format_rate": invalid / turns if turns else 0.0,
        "turns": turns / n if n else 0.0,
        "completion_tokens": sum(tokens) / n if n else 0.0,
    }


def task_set_sha256(records: Iterable[dict[str, Any]]) -> str:
    """SHA-256 of the tasks' first observations (their hashes, in task order): equal exactly when two runs posed
    the same tasks in the same order, whatever seeds or keywords produced them."""
    first = sorted(
        ((int((r.get("eval") or {}).get("task", i)), r["observation_hashes"][0]) for i, r in enumerate(records))
    )
    return hashlib.sha256("\n".join(h for _, h in first).encode()).hexdigest()


def build_card(out: str | Path) -> dict[str, Any]:
    """The card of the evaluation in directory ``out`` (``run.json``, ``records.jsonl``, the floors' files when present)."""
    out = Path(out)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    records = sorted(read_records(out / "records.jsonl"), key=lambda r: int((r.get("eval") or {}).get("task", 0)))
    card: dict[str, Any] = {
        "format": CARD_FORMAT,
        "version": 1,
        "env_id": run["protocol"]["env_id"],
        "protocol": run["protocol"],
        "protocol_digest": run["protocol_digest"],
        "sampling": run["sampling"],
        "model": run["model"],
        "package_version": run["package_version"],
        "task_set_sha256": task_set_sha256(records),
        "tasks_expected": run["protocol"]["episodes"],
        **summarize(records),
        "floors": {},
        "files": {"records.jsonl": file_sha256(out / "records.jsonl")},
    }
    for floor in ("expert", "random"):
        path = out / f"{floor}.jsonl"
        if path.is_file():
            floor_records = list(read_records(path))
            card["floors"][floor] = summarize(floor_records)
            card["floors"][floor]["same_tasks"] = task_set_sha256(floor_records) == card["task_set_sha256"]
            card["files"][f"{floor}.jsonl"] = file_sha256(path)
    return card


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a Markdown page: the settings, then one table row for the model and one per floor."""
    model = card["model"]
    s = card["sampling"]
    lines = [
        f"# {card['env_id']} under `{card['protocol']['name']}`: {model.get('name') or model.get('url') or model.get('kind')}",
        "",
        f"- protocol: `{card['protocol']['name']}` (digest `{card['protocol_digest'][:12]}`); {card['protocol'].get('source', '')}",
        f"- sampling: {s['mode']} (temperature {s['temperature']}, top-p {s['top_p']}, at most {s['max_new_tokens']} new tokens a turn)",
        "- model: " + ", ".join(f"{k} `{v}`" for k, v in model.items() if v not in (None, "")),
        f"- tasks: {card['scored']} scored of {card['tasks_expected']} ({card['infra_errors']} infra errors left out); "
        f"task set `{card['task_set_sha256'][:12]}`; agentgym-turn {card['package_version']}",
        "",
        "| policy | success % (95% CI) | score (95% CI) | return | invalid format % | turns | tokens / episode |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(name: str, m: dict[str, Any], tokens: bool) -> str:
        succ, score = m["success"], m["score"]
        return (
            f"| {name} | {_pct(succ['mean'])} ({_pct(succ['low'])}-{_pct(succ['high'])}) | {score['mean']:.3f} "
            f"({score['low']:.3f}-{score['high']:.3f}) | {m['return']:.3f} | {_pct(m['invalid_format_rate'])} | {m['turns']:.2f} | "
            + (f"{m['completion_tokens']:.0f} |" if tokens else "- |")
        )

    lines.append(row("model", card, True))
    for floor, m in card["floors"].items():
        lines.append(row(floor + ("" if m.get("same_tasks") else " (other tasks!)"), m, False))
    lines.append("")
    lines.append(
        "Recompute: `agentgym-turn replay records.jsonl` replays every episode; `agentgym-turn eval --card DIR` rebuilds this card."
    )
    return "\n".join(lines) + "\n"
