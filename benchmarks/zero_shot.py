"""Zero-shot scores of a real model on every id and every preset, greedy and sampled: the docs' table.

    python benchmarks/zero_shot.py                       # every run not yet finished (resumable), then the table
    python benchmarks/zero_shot.py --only ragen-sokoban  # the runs whose key contains this text
    python benchmarks/zero_shot.py --markdown            # print the table from the saved cards only

Each run is ``agentgym-turn eval ID --model MODEL --protocol P --sampling S`` (the same function), written to
``benchmarks/results/zero_shot/ID-P-S/`` (records, floors, card). The docs' table and three transcripts per run
(``agentgym-turn view`` pages in ``docs/transcripts/``) are made from those files. ``--episodes`` plays fewer tasks
than the protocol's (the card then says so, and the table shows each run's task count beside its interval).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from benchmarks.common import RESULTS, ROOT
except ImportError:  # python benchmarks/zero_shot.py
    from common import RESULTS, ROOT

OUT = RESULTS / "zero_shot"
TRANSCRIPTS = ROOT / "docs" / "transcripts"
MODEL = "smollm2-135m-instruct"


def runs() -> list[tuple[str, str, str]]:
    """``(env_id, protocol, sampling)`` of every run of the table: the presets first, then ``default`` on every id."""
    from agentgym_turn.evaluation import PRESETS, SAMPLINGS
    from agentgym_turn.registration import env_ids

    out = [(p.env_id, name, s) for name, p in PRESETS.items() for s in SAMPLINGS]
    out += [(env_id, "default", s) for env_id in env_ids() for s in SAMPLINGS]
    return out


def key(env_id: str, protocol: str, sampling: str) -> str:
    return f"{env_id}-{protocol}-{sampling}"


def run_one(
    env_id: str,
    protocol_name: str,
    sampling: str,
    episodes: int | None,
    batch_size: int,
    model: str,
    device: str = "cpu",
) -> dict:
    from agentgym_turn.evaluation import evaluate, protocol_for
    from reference_trainer.players import LocalPlayer

    protocol = protocol_for(protocol_name, env_id, episodes=episodes)
    player = LocalPlayer(model, device=device)
    return evaluate(
        player,
        protocol,
        OUT / key(env_id, protocol_name, sampling),
        sampling=sampling,
        batch_size=batch_size,
        resume=True,
    )


def write_transcripts(name: str, count: int = 3) -> Path | None:
    """``docs/transcripts/NAME.html``: the first ``count`` episodes of a run, as ``agentgym-turn view`` shows them."""
    from agentgym_turn.view import write_view

    records = OUT / name / "records.jsonl"
    if not records.is_file():
        return None
    lines = [line for line in records.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines.sort(key=lambda line: json.loads(line).get("eval", {}).get("task", 0))
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    part = TRANSCRIPTS / f"{name}.jsonl"
    part.write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
    try:
        return write_view(part, TRANSCRIPTS / f"{name}.html")
    finally:
        part.unlink()


def _cell(m: dict, what: str) -> str:
    v = m[what]
    if what == "success":
        return f"{100 * v['mean']:.1f} ({100 * v['low']:.1f}-{100 * v['high']:.1f})"
    return f"{v['mean']:.3f} ({v['low']:.3f}-{v['high']:.3f})"


def markdown() -> str:
    """The table of every run: a row per finished card, ``not run`` for the others."""
    from agentgym_turn.evaluation import protocol_for

    lines = [
        "| env | protocol | decoding | tasks | success % (95% CI) | score (95% CI) | invalid format % | turns | tokens / episode "
        "| expert success % / score | random success % / score | transcripts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for env_id, protocol, sampling in runs():
        name = key(env_id, protocol, sampling)
        path = OUT / name / "card.json"
        if not path.is_file():
            lines.append(f"| {env_id} | {protocol} | {sampling} | not run | | | | | | | | |")
            continue
        card = json.loads(path.read_text())
        floors = card["floors"]
        fl = {
            f: (f"{100 * floors[f]['success']['mean']:.0f} / {floors[f]['score']['mean']:.2f}" if f in floors else "-")
            for f in ("expert", "random")
        }
        standard = protocol_for(protocol, env_id).episodes
        tasks = (
            f"{card['scored']}"
            + ("" if card["protocol"]["episodes"] == standard else f" (protocol: {standard})")
            + (f" ({card['infra_errors']} infra)" if card["infra_errors"] else "")
        )
        link = f"[3 episodes](transcripts/{name}.html)" if (TRANSCRIPTS / f"{name}.html").is_file() else "-"
        lines.append(
            f"| {env_id} | {protocol} | {sampling} | {tasks} | {_cell(card, 'success')} | {_cell(card, 'score')} | "
            f"{100 * card['invalid_format_rate']:.1f} | {card['turns']:.2f} | {card['completion_tokens']:.0f} | "
            f"{fl['expert']} | {fl['random']} | {link} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="run only the runs whose key contains TEXT (repeatable)",
    )
    parser.add_argument(
        "--episodes", type=int, default=None, metavar="N", help="tasks per run (default: the protocol's)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, metavar="N", help="episodes generated together (default 32)"
    )
    parser.add_argument("--model", default=MODEL, help=f"the model (default {MODEL})")
    parser.add_argument(
        "--device", default="cpu", help="where the model runs: cpu, cuda, ... (default cpu; the card names it)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the table from the saved cards; run nothing")
    args = parser.parse_args(argv)
    if not args.markdown:
        for env_id, protocol, sampling in runs():
            name = key(env_id, protocol, sampling)
            if args.only and not any(text in name for text in args.only):
                continue
            print(f"== {name}", flush=True)
            run_one(env_id, protocol, sampling, args.episodes, args.batch_size, args.model, args.device)
            write_transcripts(name)
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
