"""Episode records that people and programs read again: write them, replay them, rescore them.

A record is one JSON line per finished episode (``"format": "agentgym-turn/episode"``, ``"version": 1``):
the env id and its ``gymnasium.make`` arguments, the reset seed and options, every action, a SHA-256 of
every observation (the observations themselves when asked for), the rewards and their components, the
state keys, exit statuses and the final flags. ``docs/recording.md`` lists the fields.

* :class:`RecordEpisode` wraps any env made by ``gymnasium.make`` and writes a record per episode,
  whatever policy drives it; :func:`record_episodes` drives one with the env's expert or a random policy.
* :func:`replay` plays the recorded actions again with today's code and reports, per episode, the first
  turn where anything differs (so a change of behaviour is caught at the turn where it starts).
* :func:`rescore` plays them again and reports only the turns whose reward or components changed: how a
  reward change rescores old trajectories, without any model.

Episodes are deterministic given the seed and the actions (the turn contract), so a record replays in any
process. A reset without a seed gets one drawn from the env's generator, so that every episode replays alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

import gymnasium as gym
import numpy as np

__all__ = [
    "FORMAT",
    "VERSION",
    "POLICIES",
    "RecordEpisode",
    "RecordFormatError",
    "ExternalResourceError",
    "external_arguments",
    "Difference",
    "EpisodeReplay",
    "ReplayReport",
    "RewardChange",
    "RescoreReport",
    "observation_hash",
    "jsonable",
    "read_records",
    "record_episodes",
    "replay",
    "rescore",
    "random_response",
]

#: The ``"format"`` of every record line.
FORMAT = "agentgym-turn/episode"
#: The record layout this module writes and reads (a newer one is refused with a message).
VERSION = 1
#: The policies :func:`record_episodes` offers.
POLICIES = ("expert", "random", "uninformed")
#: Fields compared per turn by :func:`replay`, in the order checked within a turn.
_TURN_FIELDS = (
    "observation_hash",
    "reward",
    "reward_components",
    "state_key",
    "exit_status",
    "terminated",
    "truncated",
)


class RecordFormatError(ValueError):
    """A record file that is not a list of episode records of a version this code reads."""


class ExternalResourceError(RecordFormatError):
    """A record whose env arguments name files or servers, replayed without ``allow_external=True``."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _list_of(check: Any, what: str, optional: bool = False) -> Any:
    def test(value: Any) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, list):
            return f"a list of {what}"
        bad = next((i for i, item in enumerate(value) if not check(item)), None)
        return None if bad is None else f"a list of {what} (item {bad} is {_short(value[bad], 60)})"

    return test


def _of(check: Any, what: str) -> Any:
    return lambda value: None if check(value) else what


#: What each field of a record must hold (a field left out is not checked: older records lack some).
_FIELD_CHECKS: dict[str, Any] = {
    "env_id": _of(lambda v: v is None or isinstance(v, str), "a string or null"),
    "env_kwargs": _of(lambda v: v is None or isinstance(v, dict), "an object or null"),
    "max_episode_steps": _of(
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0), "a positive integer or null"
    ),
    "seed": _of(lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)), "an integer or null"),
    "options": _of(lambda v: v is None or isinstance(v, dict), "an object or null"),
    "actions": _list_of(lambda v: True, "actions"),
    "observation_hashes": _list_of(lambda v: isinstance(v, str), "strings"),
    "observations": _list_of(lambda v: isinstance(v, str), "strings"),
    "rewards": _list_of(_is_number, "finite numbers"),
    "reward_components": _list_of(
        lambda v: v is None or (isinstance(v, dict) and all(_is_number(x) for x in v.values())),
        "objects of numbers (or nulls)",
        optional=True,
    ),
    "state_keys": _list_of(lambda v: True, "state keys", optional=True),
    "exit_statuses": _list_of(lambda v: v is None or isinstance(v, str), "strings (or nulls)", optional=True),
    "terminated": _of(lambda v: isinstance(v, bool), "true or false"),
    "truncated": _of(lambda v: isinstance(v, bool), "true or false"),
    "success": _of(lambda v: v is None or isinstance(v, (bool, int, float)), "true, false, a number or null"),
    "score": _of(lambda v: v is None or _is_number(v), "a finite number or null"),
}


def _check_fields(record: dict[str, Any], where: str) -> None:
    """:class:`RecordFormatError` naming the record and the first field whose value this code cannot use."""
    for name, check in _FIELD_CHECKS.items():
        if name in record:
            problem = check(record[name])
            if problem is not None:
                raise RecordFormatError(f"{where}: field {name!r} must be {problem}, got {_short(record[name], 60)}.")
    n = len(record.get("actions", []))
    if "rewards" in record and len(record["rewards"]) != n:
        raise RecordFormatError(
            f"{where}: {len(record['rewards'])} rewards for {n} actions; a record has one reward per action."
        )


# ---------------------------------------------------------------------------------------------- values
def jsonable(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars and arrays become numbers and lists, tuples lists, sets sorted
    lists, dict keys strings; anything else JSON cannot hold becomes its ``repr``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=repr))
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    return repr(value)


def _text(observation: Any) -> str:
    """An observation as the text that is hashed and shown (non-text observations as canonical JSON)."""
    if isinstance(observation, str):
        return observation
    return json.dumps(jsonable(observation), sort_keys=True, ensure_ascii=False)


def observation_hash(observation: Any) -> str:
    """SHA-256 (hex) of an observation's UTF-8 text: what a record keeps of every observation."""
    return hashlib.sha256(_text(observation).encode("utf-8", "surrogatepass")).hexdigest()


def _same(a: Any, b: Any) -> bool:
    """Exact equality of recorded and replayed values (floats bit for bit; NaN equals NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _line(record: dict[str, Any]) -> str:
    """One JSON line; a record holding lone surrogates (any string is a legal action) is written ASCII-escaped."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
    return text + "\n"


def _spec_of(env: gym.Env) -> tuple[str | None, dict[str, Any], int | None]:
    """``(env id, JSON-able make kwargs, max_episode_steps)`` of an env made by ``gymnasium.make``."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return None, {}, None
    return spec.id, jsonable(dict(spec.kwargs or {})), spec.max_episode_steps


# ---------------------------------------------------------------------------------------------- writing
class RecordEpisode(gym.Wrapper):
    """Writes one JSON line per episode of the wrapped env to ``out`` (a path, created anew, or an open
    text stream, left open): when the episode terminates or is truncated, else at the next ``reset`` or at
    ``close``. An episode without a step is not written.

    Args:
        env: an env made by ``gymnasium.make`` (its id and kwargs are what a replay makes again).
        out: file path or text stream.
        observations: also store every observation's text (the viewer shows them; hashes are always kept).

    A ``reset`` without ``seed`` gets one drawn from the env's own generator, so each episode replays alone.
    """

    def __init__(self, env: gym.Env, out: str | os.PathLike | IO[str], *, observations: bool = False):
        super().__init__(env)
        if isinstance(out, (str, os.PathLike)):
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            self._stream: IO[str] = open(out, "w", encoding="utf-8", newline="\n")
            self._owns_stream = True
        else:
            self._stream, self._owns_stream = out, False
        self.store_observations = bool(observations)
        self.env_id, self.env_kwargs, self.max_episode_steps = _spec_of(env)
        self.episodes_written = 0
        self._episode: dict[str, Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._flush()
        if seed is None:  # drawn from the env's own stream, so the episode is reproducible from the record
            seed = int(self.env.unwrapped.np_random.integers(2**31 - 1))
        observation, info = self.env.reset(seed=seed, options=options)
        from agentgym_turn import __version__

        self._episode = {
            "format": FORMAT,
            "version": VERSION,
            "package_version": __version__,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "max_episode_steps": self.max_episode_steps,
            "seed": int(seed),
            "options": jsonable(options) if options is not None else None,
            "actions": [],
            "observation_hashes": [observation_hash(observation)],
            "rewards": [],
            "reward_components": [],
            "state_keys": [jsonable(info.get("state_key"))],
            "exit_statuses": [],
            "terminated": False,
            "truncated": False,
            "success": jsonable(info.get("success")),
            "score": jsonable(info.get("score")),
        }
        if self.store_observations:
            self._episode["observations"] = [_text(observation)]
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        episode = self._episode
        if episode is not None:
            episode["actions"].append(jsonable(action))
            episode["observation_hashes"].append(observation_hash(observation))
            if self.store_observations:
                episode["observations"].append(_text(observation))
            episode["rewards"].append(float(reward))
            components = info.get("reward_components")
            episode["reward_components"].append(jsonable(components) if components is not None else None)
            episode["state_keys"].append(jsonable(info.get("state_key")))
            episode["exit_statuses"].append(jsonable(info.get("exit_status")))
            episode.update(
                terminated=bool(terminated),
                truncated=bool(truncated),
                success=jsonable(info.get("success")),
                score=jsonable(info.get("score")),
            )
            if terminated or truncated:
                self._flush()
        return observation, reward, terminated, truncated, info

    def annotate(self, **fields: Any) -> None:
        """Add (or replace) top-level fields of the current episode's record, e.g. what an evaluation knows of
        the turn it is about to play (replay ignores fields it does not compare)."""
        if self._episode is not None:
            self._episode.update({k: jsonable(v) for k, v in fields.items()})

    def end_episode(self, **fields: Any) -> None:
        """Write the current episode now, with ``fields`` added, even if it has no step yet: an episode that a fault
        outside the env ended (a model endpoint that stopped answering) is kept as far as it was played."""
        if self._episode is not None:
            self.annotate(**fields)
            self._flush(force=True)

    def close(self) -> None:
        try:
            self._flush()
            if self._owns_stream and not self._stream.closed:
                self._stream.close()
        finally:
            super().close()

    def _flush(self, force: bool = False) -> None:
        episode, self._episode = self._episode, None
        if episode is None or not (episode["actions"] or force):
            return
        if not any(c is not None for c in episode["reward_components"]):
            del episode["reward_components"]  # an env without components: the field is absent, not a list of nulls
        self._stream.write(_line(episode))
        self._stream.flush()
        self.episodes_written += 1


_GARBAGE_PIECES = (
    "<answer>",
    "</answer>",
    "<think>",
    "</think>",
    "<search>",
    "click[",
    "search[",
    "]",
    "||",
    "\n",
    "\t",
    "Up",
    "left",
    "buy now",
    "\u00e9",
    "\u2028",
    "\U0001f600",
    "\x00",
    "  ",
)


def random_response(rng: np.random.Generator, info: dict[str, Any], expert: str | None = None) -> str:
    """A random response for one turn: an entry of ``info["available_actions"]`` (when there are any),
    ``expert`` (when given) or garbage (tags, brackets, odd characters, random text), picked at random."""
    kinds = ["garbage"]
    if info.get("available_actions"):
        kinds.append("available")
    if expert is not None:
        kinds.append("expert")
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "available":
        actions = list(info["available_actions"])
        return str(actions[int(rng.integers(len(actions)))])
    if kind == "expert":
        return str(expert)
    pieces = []
    for _ in range(int(rng.integers(0, 8))):
        if rng.random() < 0.5:
            pieces.append(_GARBAGE_PIECES[int(rng.integers(len(_GARBAGE_PIECES)))])
        else:
            pieces.append("".join(chr(int(c)) for c in rng.integers(32, 127, size=int(rng.integers(1, 12)))))
    return "".join(pieces)


def record_episodes(
    env_id: str,
    episodes: int,
    path: str | os.PathLike | IO[str],
    policy: str = "expert",
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    observations: bool = True,
) -> int:
    """Play ``episodes`` episodes of ``env_id`` (seeds ``seed``, ``seed + 1``, ...) with ``policy`` and write
    their records to ``path``; return the number of turns played.

    ``"expert"`` plays ``env.unwrapped.expert_action()``; ``"random"`` plays :func:`random_response` (an
    available action, the expert's response or garbage), ``"uninformed"`` the same without the expert's response
    (a floor), drawn from a generator seeded with ``seed``, so the same call writes the same file.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}.")
    if episodes < 0:
        raise ValueError(f"episodes must be >= 0, got {episodes}.")
    rng = np.random.default_rng(seed)
    turns = 0
    env = RecordEpisode(gym.make(env_id, **(env_kwargs or {})), path, observations=observations)
    try:
        for i in range(episodes):
            _, info = env.reset(seed=seed + i)
            done = False
            while not done:
                expert = env.unwrapped.expert_action()
                if policy == "expert":
                    action = expert
                else:  # "uninformed" never plays the expert's response: a floor, not a mixture with the expert
                    action = random_response(rng, info, expert if policy == "random" else None)
                _, _, terminated, truncated, info = env.step(action)
                turns += 1
                done = terminated or truncated
    finally:
        env.close()
    return turns


# ---------------------------------------------------------------------------------------------- reading
def read_records(source: str | os.PathLike | IO[str]) -> Iterator[dict[str, Any]]:
    """The episode records of a JSONL file or text stream, in order; :class:`RecordFormatError` names the
    first line that is not a record this code reads."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as stream:
            yield from read_records(stream)
        return
    name = getattr(source, "name", "the record stream")
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise RecordFormatError(
                f"{name}, line {number}: not JSON ({e.msg}); a record file holds one JSON object per line."
            ) from e
        except RecursionError:
            raise RecordFormatError(
                f"{name}, line {number}: JSON nested too deeply to read; not an episode record."
            ) from None
        except ValueError as e:  # an integer past Python's 4,300-digit conversion limit
            raise RecordFormatError(
                f"{name}, line {number}: a JSON value cannot be read ({e}); not an episode record."
            ) from None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise RecordFormatError(f'{name}, line {number}: not an episode record (no "format": {FORMAT!r}).')
        version = record.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise RecordFormatError(
                f"{name}, line {number}: record version {version!r}; this agentgym-turn reads versions up to {VERSION}. Upgrade agentgym-turn."
            )
        _check_fields(record, f"{name}, line {number}")
        yield record


def _make_kwargs(record: dict[str, Any]) -> dict[str, Any]:
    """``gymnasium.make`` keywords that rebuild a record's env: only the kwargs whose JSON differs from the
    registered ones (so a registered tuple stays a tuple), plus a changed turn limit."""
    registered = gym.spec(record["env_id"])
    defaults = jsonable(dict(registered.kwargs or {}))
    kwargs = {k: v for k, v in (record.get("env_kwargs") or {}).items() if k not in defaults or defaults[k] != v}
    steps = record.get("max_episode_steps")
    if steps is not None and steps != registered.max_episode_steps:
        kwargs["max_episode_steps"] = steps
    return kwargs


_URL = re.compile(r"^\s*[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def external_arguments(env_id: str, kwargs: dict[str, Any]) -> list[str]:
    """The arguments of ``gymnasium.make(env_id, **kwargs)`` that name files or servers: those the env class
    declares in ``external_kwargs`` (given and not null), and any whose value holds a URL."""
    from gymnasium.envs.registration import load_env_creator

    entry = gym.spec(env_id).entry_point
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    declared = getattr(creator, "external_kwargs", frozenset())
    return sorted(
        k for k, v in kwargs.items() if (k in declared and v is not None) or any(_URL.match(s) for s in _strings(v))
    )


class _Envs:
    """Envs made from records, one per distinct (id, kwargs), reused across episodes and closed at the end.
    Without ``allow_external``, a record whose env arguments name files or servers is refused
    (:class:`ExternalResourceError`): a record file must not make replay read a path or call a URL it names."""

    def __init__(self, allow_external: bool = False) -> None:
        self._envs: dict[str, gym.Env] = {}
        self.allow_external = allow_external

    def get(self, record: dict[str, Any]) -> gym.Env:
        if not record.get("env_id"):
            raise ValueError("the record names no env id (it was written from an env not made by gymnasium.make)")
        import agentgym_turn  # noqa: F401  (registers the ids)

        kwargs = _make_kwargs(record)
        if not self.allow_external:
            named = external_arguments(record["env_id"], kwargs)
            if named:
                raise ExternalResourceError(
                    f"a record of {record['env_id']} names files or servers in its env arguments ({', '.join(f'{k}={_short(kwargs[k], 80)}' for k in named)}); "
                    "replaying it would read or call them. If you trust the file, pass --allow-external (allow_external=True)."
                )
        key = json.dumps([record["env_id"], kwargs], sort_keys=True, default=repr)
        if key not in self._envs:
            self._envs[key] = gym.make(record["env_id"], **kwargs)
        return self._envs[key]

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


# ---------------------------------------------------------------------------------------------- replay
@dataclass(frozen=True)
class Difference:
    """Where a replay first differs from its record: ``turn`` 0 is the reset, ``k`` the ``k``-th step;
    ``field`` a record field (``observation_hash``, ``reward``, ``reward_components``, ``state_key``,
    ``exit_status``, ``terminated``, ``truncated``, ``success``, ``score``) or ``env`` (it could not be made
    or reset)."""

    turn: int
    field: str
    recorded: Any
    now: Any

    def __str__(self) -> str:
        return f"turn {self.turn}: {self.field} recorded {_short(self.recorded)}, now {_short(self.now)}"


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class EpisodeReplay:
    """One replayed episode: its line in the file (``index``, 0-based), id, seed, recorded turns, and the
    first :class:`Difference` (``None``: identical)."""

    index: int
    env_id: str | None
    seed: int | None
    turns: int
    difference: Difference | None


@dataclass
class ReplayReport:
    """:func:`replay`'s answer: one :class:`EpisodeReplay` per record."""

    episodes: list[EpisodeReplay] = field(default_factory=list)

    @property
    def differing(self) -> list[EpisodeReplay]:
        """The episodes that differ from their records."""
        return [e for e in self.episodes if e.difference is not None]

    @property
    def ok(self) -> bool:
        return not self.differing

    def summary(self) -> str:
        """One line per differing episode (its first difference), then a count."""
        lines = [f"episode {e.index} ({e.env_id}, seed {e.seed}): {e.difference}" for e in self.differing]
        turns = sum(e.turns for e in self.episodes)
        lines.append(f"{len(self.differing)} of {len(self.episodes)} episodes differ ({turns} turns replayed).")
        return "\n".join(lines)


def _play(env: gym.Env, record: dict[str, Any]) -> Iterator[tuple[int, Any, float | None, bool, bool, dict[str, Any]]]:
    """Reset with the record's seed and options, then step its actions: yields ``(turn, observation, reward,
    terminated, truncated, info)``, turn 0 being the reset (reward ``None``)."""
    observation, info = env.reset(seed=record.get("seed"), options=record.get("options"))
    yield 0, observation, None, False, False, info
    for turn, action in enumerate(record.get("actions", []), start=1):
        observation, reward, terminated, truncated, info = env.step(action)
        yield turn, observation, float(reward), bool(terminated), bool(truncated), info


def _first_difference(env: gym.Env, record: dict[str, Any]) -> Difference | None:
    actions = record.get("actions", [])
    n = len(actions)
    hashes = record.get("observation_hashes", [])
    components = record.get("reward_components")
    keys = record.get("state_keys")
    statuses = record.get("exit_statuses")
    info: dict[str, Any] = {}
    for turn, observation, reward, terminated, truncated, info in _play(env, record):
        now = {"observation_hash": observation_hash(observation), "state_key": jsonable(info.get("state_key"))}
        want = {
            "observation_hash": hashes[turn] if turn < len(hashes) else None,
            "state_key": keys[turn] if keys is not None and turn < len(keys) else None,
        }
        if turn > 0:
            i = turn - 1
            last = turn == n
            got_components = info.get("reward_components")
            now.update(
                reward=reward,
                reward_components=jsonable(got_components) if got_components is not None else None,
                exit_status=jsonable(info.get("exit_status")),
                terminated=terminated,
                truncated=truncated,
            )
            want.update(
                reward=record["rewards"][i] if i < len(record.get("rewards", [])) else None,
                reward_components=components[i] if components is not None and i < len(components) else None,
                exit_status=statuses[i] if statuses is not None and i < len(statuses) else None,
                terminated=bool(record.get("terminated")) if last else False,
                truncated=bool(record.get("truncated")) if last else False,
            )
        for name in _TURN_FIELDS:
            if name not in want:
                continue
            if want[name] is None and name in ("reward_components", "state_key", "exit_status"):
                continue  # not recorded (an env that did not have it then): nothing to compare
            if not _same(want[name], now[name]):
                return Difference(turn, name, want[name], now[name])
    for name in ("success", "score"):
        if name in record and record[name] is not None and not _same(record[name], jsonable(info.get(name))):
            return Difference(n, name, record[name], jsonable(info.get(name)))
    return None


def replay(path: str | os.PathLike | IO[str], *, allow_external: bool = False) -> ReplayReport:
    """Make each record's env again, reset it with the recorded seed and options, play the recorded actions
    and compare, turn by turn, observation hashes, rewards (exact float equality), reward components and
    state keys and exit statuses (where recorded), and the flags; report each episode's first difference.
    A record whose env arguments name files or servers raises :class:`ExternalResourceError` unless
    ``allow_external``."""
    report = ReplayReport()
    envs = _Envs(allow_external)
    try:
        for index, record in enumerate(read_records(path)):
            try:
                env = envs.get(record)
                difference = _first_difference(env, record)
            except ExternalResourceError as e:
                raise ExternalResourceError(f"episode {index}: {e}") from None
            except Exception as e:  # an env that cannot be made or reset any more is the record's difference
                difference = Difference(0, "env", record.get("env_id"), f"{type(e).__name__}: {e}")
            report.episodes.append(
                EpisodeReplay(
                    index, record.get("env_id"), record.get("seed"), len(record.get("actions", [])), difference
                )
            )
    finally:
        envs.close()
    return report


# ---------------------------------------------------------------------------------------------- rescore
@dataclass(frozen=True)
class RewardChange:
    """A turn whose reward or components today's code computes differently from the record."""

    episode: int
    turn: int
    recorded_reward: float
    reward: float
    recorded_components: dict[str, float] | None
    components: dict[str, float] | None

    def __str__(self) -> str:
        text = f"episode {self.episode}, turn {self.turn}: reward {self.recorded_reward!r} -> {self.reward!r}"
        if self.recorded_components is not None and not _same(self.recorded_components, self.components):
            text += f"; components {self.recorded_components} -> {self.components}"
        return text


@dataclass
class RescoreReport:
    """:func:`rescore`'s answer: the changed turns, how many episodes and turns were rescored, and the
    episodes whose actions could not all be played (``(episode, turn, why)``: the episode ended sooner today,
    or its env could not be made)."""

    changes: list[RewardChange] = field(default_factory=list)
    episodes: int = 0
    turns: int = 0
    unplayable: list[tuple[int, int, str]] = field(default_factory=list)

    def summary(self) -> str:
        """One line per changed turn, one per unplayable episode, then the counts."""
        lines = [str(c) for c in self.changes]
        lines += [f"episode {e}: stopped at turn {t}: {why}" for e, t, why in self.unplayable]
        lines.append(
            f"{len(self.changes)} changed turns of {self.turns} in {self.episodes} episodes"
            + (f"; {len(self.unplayable)} episodes could not be played to their end." if self.unplayable else ".")
        )
        return "\n".join(lines)


def rescore(path: str | os.PathLike | IO[str], *, allow_external: bool = False) -> RescoreReport:
    """Replay each record's actions with today's code and report exactly the turns whose reward or reward
    components differ from the record (observations are not compared): old trajectories under a new reward.
    Records naming files or servers: as :func:`replay`."""
    report = RescoreReport()
    envs = _Envs(allow_external)
    try:
        for index, record in enumerate(read_records(path)):
            report.episodes += 1
            components = record.get("reward_components")
            n = len(record.get("actions", []))
            try:
                env = envs.get(record)
                for turn, _, reward, terminated, truncated, info in _play(env, record):
                    if turn == 0:
                        continue
                    report.turns += 1
                    i = turn - 1
                    got = info.get("reward_components")
                    got = jsonable(got) if got is not None else None
                    want = components[i] if components is not None else None
                    if not _same(record["rewards"][i], reward) or (want is not None and not _same(want, got)):
                        report.changes.append(RewardChange(index, turn, record["rewards"][i], reward, want, got))
                    if (terminated or truncated) and turn < n:
                        report.unplayable.append(
                            (index, turn, f"the episode ends here today; {n - turn} recorded actions were not played")
                        )
                        break
            except ExternalResourceError as e:
                raise ExternalResourceError(f"episode {index}: {e}") from None
            except Exception as e:
                report.unplayable.append((index, 0, f"{type(e).__name__}: {e}"))
    finally:
        envs.close()
    return report
