"""Score any model on fixed test tasks under a protocol, as records anyone can replay.

:func:`evaluate` plays the protocol's test tasks with a :class:`~.players.Player`, ``batch_size`` episodes at a
time (one batched request per turn), and writes into ``out``:

* ``run.json``: the protocol, the decoding, the model's description and the package version;
* ``records.jsonl``: one :mod:`agentgym_turn.recording` record per task, with the observations and an ``eval``
  field (task index, ``status``, tokens per turn); ``agentgym-turn replay`` replays them;
* ``expert.jsonl`` and ``random.jsonl``: the floors, the env's expert and a random policy on the same tasks;
* ``card.json`` and ``card.md``: :func:`~.card.build_card` of those files.

``resume=True`` keeps the finished episodes of an interrupted run (not its ``infra_error`` ones, which are played
again) and plays the rest; it refuses a directory whose ``run.json`` holds other settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from ..chat import ChatView
from ..recording import RecordEpisode, read_records, record_episodes
from .card import build_card, card_markdown
from .players import Player, Reply
from .protocols import Protocol

RUN_FILE = "run.json"
RECORDS_FILE = "records.jsonl"
#: The floors played on the same tasks: file stem -> :func:`~agentgym_turn.recording.record_episodes` policy. The random
#: floor never plays the expert's response (an available action or garbage, at random).
FLOORS = {"expert": "expert", "random": "uninformed"}
#: ``eval.status`` of an episode: played to its end by the model, cut by a fault outside it, or by its context window.
STATUSES = ("ok", "infra_error", "context_overflow")


class EvalSettingsError(ValueError):
    """``resume`` into a directory whose run used other settings (protocol, decoding or model)."""


def _run_settings(protocol: Protocol, player: Player, sampling: str) -> dict[str, Any]:
    from .. import __version__

    return {
        "protocol": protocol.to_dict(),
        "protocol_digest": protocol.digest(),
        "sampling": {"mode": sampling, **protocol.sampling(sampling), "max_new_tokens": protocol.max_new_tokens},
        "model": player.describe(),
        "package_version": __version__,
    }


def _kept_records(out: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished episodes of an earlier run in ``out`` with the same settings (file rewritten without the rest)."""
    run_path, records_path = out / RUN_FILE, out / RECORDS_FILE
    if not run_path.is_file():
        return []
    before = json.loads(run_path.read_text(encoding="utf-8"))
    for key in ("protocol_digest", "sampling", "model"):
        if before.get(key) != settings[key]:
            raise EvalSettingsError(
                f"--resume: {out} holds a run with another {key} ({before.get(key)!r}, now {settings[key]!r}); "
                "use another --out, or drop --resume to start over."
            )
    if not records_path.is_file():
        return []
    kept = [r for r in read_records(records_path) if (r.get("eval") or {}).get("status") != "infra_error"]
    tmp = records_path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for r in kept:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    os.replace(tmp, records_path)
    return kept


def _turn_seed(task_seed: int, turn: int) -> int:
    """The sampling seed of one turn of one task (endpoints that take a seed draw the same reply when asked again)."""
    return (int(task_seed) * 1009 + int(turn)) % (2**31)


def _play_chunk(
    chats: list[ChatView],
    tasks: list[int],
    protocol: Protocol,
    player: Player,
    sampling: dict[str, float],
    on_done: Any,
) -> None:
    """Play one episode per task on ``chats`` (one env each) to their ends, a batched ``respond`` per turn."""
    seeds = protocol.seeds
    states: dict[int, dict[str, Any]] = {}
    active: list[int] = []
    for slot, task in enumerate(tasks):
        chats[slot].reset(seed=seeds[task])
        states[slot] = {"task": task, "status": "ok", "completion_tokens": [], "prompt_tokens": []}
        chats[slot].env.annotate(eval=states[slot])
        active.append(slot)
    turn = 0
    while active:
        replies: list[Reply] = player.respond(
            [chats[s] for s in active],
            max_new_tokens=protocol.max_new_tokens,
            seeds=[_turn_seed(seeds[states[s]["task"]], turn) for s in active],
            **sampling,
        )
        still: list[int] = []
        for slot, reply in zip(active, replies):
            state, chat = states[slot], chats[slot]
            record: RecordEpisode = chat.env  # type: ignore[assignment]
            if reply.status != "ok":
                state.update(status=reply.status, error=reply.error)
                record.end_episode(eval=state)
                on_done(state, None)
                continue
            state["completion_tokens"].append(int(reply.completion_tokens))
            state["prompt_tokens"].append(int(reply.prompt_tokens))
            record.annotate(eval=state)
            _, _, terminated, truncated, info = chat.step(reply.action)
            if terminated or truncated:
                on_done(state, info)
            else:
                still.append(slot)
        active = still
        turn += 1


def evaluate(
    player: Player,
    protocol: Protocol,
    out: str | os.PathLike,
    *,
    sampling: str = "greedy",
    batch_size: int = 16,
    resume: bool = False,
    floors: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Play ``protocol``'s test tasks with ``player`` and write the run's files into ``out`` (module docstring);
    return the card. ``batch_size`` episodes share each batched request."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = _run_settings(protocol, player, sampling)
    kept = _kept_records(out, settings) if resume else []
    done = {int(r["eval"]["task"]) for r in kept if r.get("eval")}
    (out / RUN_FILE).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    pending = [t for t in range(protocol.episodes) if t not in done]
    stream = open(out / RECORDS_FILE, "a" if resume else "w", encoding="utf-8", newline="\n")
    chats: list[ChatView] = []
    bar = None
    try:
        if pending:
            for _ in range(min(batch_size, len(pending))):
                env = RecordEpisode(gym.make(protocol.env_id, **protocol.make_kwargs()), stream, observations=True)
                chats.append(ChatView(env, tokenizer=player.tokenizer, **protocol.chat))
        tally = {"n": 0, "wins": 0, "score": 0.0, "infra": 0}
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=protocol.episodes,
                initial=len(done),
                desc=f"{protocol.env_id} {protocol.name} {sampling}",
                unit="ep",
            )

        def on_done(state: dict[str, Any], info: dict[str, Any] | None) -> None:
            if info is None:
                tally["infra"] += state["status"] == "infra_error"
            else:
                tally["n"] += 1
                tally["wins"] += bool(info.get("success"))
                tally["score"] += float(info.get("score") or 0.0)
            if bar is not None:
                n = max(tally["n"], 1)
                bar.set_postfix(
                    success=f"{tally['wins'] / n:.3f}", score=f"{tally['score'] / n:.3f}", infra=tally["infra"]
                )
                bar.update(1)

        for start in range(0, len(pending), len(chats) or 1):
            chunk = pending[start : start + len(chats)]
            _play_chunk(chats[: len(chunk)], chunk, protocol, player, protocol.sampling(sampling), on_done)
    finally:
        if bar is not None:
            bar.close()
        for chat in chats:
            chat.close()
        stream.close()
    if floors:
        for floor, policy in FLOORS.items():
            path = out / f"{floor}.jsonl"
            if not (resume and path.is_file()):
                record_episodes(
                    protocol.env_id,
                    protocol.episodes,
                    path,
                    policy=policy,
                    seed=protocol.first_seed,
                    env_kwargs=protocol.make_kwargs(),
                    observations=True,
                )
    card = build_card(out)
    (out / "card.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    (out / "card.md").write_text(card_markdown(card), encoding="utf-8")
    return card
