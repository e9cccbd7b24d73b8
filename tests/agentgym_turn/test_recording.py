"""Episode records (agentgym_turn/recording.py): every registered id replays its records with no difference,
a tampered record is caught at the turn and field that were changed, and rescore finds exactly the turns a
reward change touches."""

from __future__ import annotations

import io
import json
import sys

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn
from agentgym_turn.recording import (
    FORMAT,
    RecordEpisode,
    RecordFormatError,
    read_records,
    record_episodes,
    replay,
    rescore,
)

IDS = agentgym_turn.env_ids()
#: Episodes replayed by the registry-wide test: the project's bar ("replay reproduces 1,000 recorded episodes
#: over all ids with 0 differences"); record + replay of all of them costs about 10 s of one core.
EPISODES = 1000


def _write(records: list[dict], path) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_replay__1000_expert_and_random_episodes_over_every_id_replay_with_no_difference(tmp_path):
    per_id, extra = divmod(EPISODES, len(IDS))
    total = 0
    for i, env_id in enumerate(IDS):
        n = per_id + (i < extra)
        expert = 2 * n // 3
        for policy, count, seed in (("expert", expert, 0), ("random", n - expert, 10_000)):
            path = tmp_path / f"{i}-{policy}.jsonl"
            record_episodes(env_id, count, path, policy=policy, seed=seed, observations=False)
            report = replay(path)
            assert len(report.episodes) == count
            assert report.ok, f"{env_id} ({policy}):\n{report.summary()}"
            total += count
    assert total == EPISODES


def test_record__fields_and_lengths_follow_the_format(tmp_path):
    path = tmp_path / "shop.jsonl"
    turns = record_episodes("TurnWebShop-v0", 3, path, policy="random", seed=4)
    records = list(read_records(path))
    assert len(records) == 3 and sum(len(r["actions"]) for r in records) == turns
    for seed, r in enumerate(records, start=4):
        assert r["format"] == FORMAT and r["version"] == 1 and r["package_version"] == agentgym_turn.__version__
        assert r["env_id"] == "TurnWebShop-v0" and r["seed"] == seed and r["options"] is None
        n = len(r["actions"])
        assert len(r["observation_hashes"]) == len(r["observations"]) == len(r["state_keys"]) == n + 1
        assert len(r["rewards"]) == len(r["reward_components"]) == len(r["exit_statuses"]) == n
        assert all(abs(sum(c.values()) - w) < 1e-9 for c, w in zip(r["reward_components"], r["rewards"]))
        assert r["terminated"] or r["truncated"]


def test_record__the_same_call_writes_the_same_file(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        record_episodes("TurnSokoban-8x8-v0", 4, path, policy="random", seed=3)
    assert a.read_bytes() == b.read_bytes()


@pytest.fixture(scope="module")
def shop_records(tmp_path_factory):
    """Expert WebShop records: several turns each, so a change in the middle of an episode is possible."""
    path = tmp_path_factory.mktemp("records") / "shop.jsonl"
    record_episodes("TurnWebShop-v0", 4, path, policy="expert", observations=False)
    records = list(read_records(path))
    assert all(len(r["actions"]) >= 3 for r in records)
    return records


@pytest.mark.parametrize("turn", [1, 2, 3])
def test_replay__a_changed_reward_is_reported_at_its_turn(shop_records, tmp_path, turn):
    records = json.loads(json.dumps(shop_records))
    records[2]["rewards"][turn - 1] += 0.5
    _write(records, tmp_path / "r.jsonl")
    report = replay(tmp_path / "r.jsonl")
    assert [e.index for e in report.differing] == [2]
    d = report.episodes[2].difference
    assert (d.turn, d.field) == (turn, "reward")
    assert d.recorded == shop_records[2]["rewards"][turn - 1] + 0.5 and d.now == shop_records[2]["rewards"][turn - 1]


@pytest.mark.parametrize("turn", [1, 2, 3])
def test_replay__a_changed_action_is_reported_at_the_observation_it_changes(shop_records, tmp_path, turn):
    records = json.loads(json.dumps(shop_records))
    records[1]["actions"][turn - 1] = "click[no such thing]"
    _write(records, tmp_path / "r.jsonl")
    report = replay(tmp_path / "r.jsonl")
    assert [e.index for e in report.differing] == [1]
    d = report.episodes[1].difference
    assert (d.turn, d.field) == (turn, "observation_hash")
    assert d.recorded == shop_records[1]["observation_hashes"][turn]


@pytest.mark.parametrize("turn", [0, 1, 3])
def test_replay__a_changed_observation_hash_is_reported_at_its_turn(shop_records, tmp_path, turn):
    records = json.loads(json.dumps(shop_records))
    records[0]["observation_hashes"][turn] = "0" * 64
    _write(records, tmp_path / "r.jsonl")
    d = replay(tmp_path / "r.jsonl").episodes[0].difference
    assert (d.turn, d.field, d.recorded) == (turn, "observation_hash", "0" * 64)
    assert d.now == shop_records[0]["observation_hashes"][turn]


@pytest.mark.parametrize(
    "name, index, value, turn, field",
    [
        ("state_keys", 2, "x", 2, "state_key"),
        ("exit_statuses", 1, "env_error", 2, "exit_status"),
        ("reward_components", 0, {"task": 9.0}, 1, "reward_components"),
        ("terminated", None, False, -1, "terminated"),
        ("score", None, -1.0, -1, "score"),
    ],
)
def test_replay__changed_components_state_keys_statuses_flags_and_score_are_reported(
    shop_records, tmp_path, name, index, value, turn, field
):
    records = json.loads(json.dumps(shop_records))
    if index is None:
        records[3][name] = value
    else:
        records[3][name][index] = value
    _write(records, tmp_path / "r.jsonl")
    d = replay(tmp_path / "r.jsonl").episodes[3].difference
    assert (d.turn, d.field) == (turn if turn >= 0 else len(records[3]["actions"]), field)


def test_replay__an_env_id_that_no_longer_exists_is_the_episode_difference(shop_records, tmp_path):
    records = json.loads(json.dumps(shop_records))
    records[0]["env_id"] = "TurnNoSuchEnv-v0"
    _write(records, tmp_path / "r.jsonl")
    report = replay(tmp_path / "r.jsonl")
    assert [e.index for e in report.differing] == [0] and report.episodes[0].difference.field == "env"


class _NumpyInfo(gym.Wrapper):
    """Returns info values as numpy types and sets, as some envs do."""

    def _np(self, info):
        info = dict(info)
        info["success"] = np.bool_(info["success"])
        info["score"] = np.float64(info["score"])
        info["reward_components"] = {k: np.float64(v) for k, v in info["reward_components"].items()}
        info["extra"] = {"tags": {"b", "a"}, "n": np.int64(3)}
        return info

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self._np(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, np.float64(reward), terminated, truncated, self._np(info)


def test_record_episode__numpy_info_values_are_written_as_plain_json_and_replay(tmp_path):
    path = tmp_path / "np.jsonl"
    env = RecordEpisode(_NumpyInfo(gym.make("TurnSokoban-v0")), path)
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            *_, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
            done = terminated or truncated
    env.close()
    records = list(read_records(path))
    assert len(records) == 3 and all(type(r["success"]) is bool and type(r["score"]) is float for r in records)
    assert replay(path).ok


def test_record_episode__writes_at_the_end_at_the_next_reset_and_at_close_and_skips_empty_episodes():
    out = io.StringIO()
    env = RecordEpisode(gym.make("TurnWebShop-v0"), out)
    env.reset(seed=0)
    env.step(env.unwrapped.expert_action())
    assert out.getvalue() == ""  # not over yet
    env.reset(seed=1)  # the first episode is abandoned: written now
    assert len(out.getvalue().splitlines()) == 1
    env.reset(seed=2)  # the second had no step: nothing written
    assert len(out.getvalue().splitlines()) == 1
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
        done = terminated or truncated
    assert len(out.getvalue().splitlines()) == 2  # written at termination
    env.reset(seed=3)
    env.step("search[anything]")
    env.close()
    assert not out.closed  # a stream given by the caller stays open
    records = list(read_records(io.StringIO(out.getvalue())))
    assert [r["seed"] for r in records] == [0, 2, 3]
    assert [r["terminated"] or r["truncated"] for r in records] == [False, True, False]
    assert replay(io.StringIO(out.getvalue())).ok


def test_record_episode__a_reset_without_seed_gets_one_that_replays():
    out = io.StringIO()
    env = RecordEpisode(gym.make("TurnSokoban-8x8-v0"), out)
    env.reset(seed=5)
    for _ in range(3):
        env.reset()
        env.step(env.unwrapped.expert_action())
    env.close()
    records = list(read_records(io.StringIO(out.getvalue())))
    assert len(records) == 3 and all(isinstance(r["seed"], int) for r in records)
    assert replay(io.StringIO(out.getvalue())).ok


def test_record_episode__changed_kwargs_and_turn_limit_are_kept_and_replayed():
    out = io.StringIO()
    env = RecordEpisode(gym.make("TurnSokoban-v0", dim=(7, 7), max_episode_steps=2), out)
    env.reset(seed=1)
    for _ in range(2):
        env.step("<answer>nonsense</answer>")
    env.close()
    (record,) = read_records(io.StringIO(out.getvalue()))
    assert record["env_kwargs"]["dim"] == [7, 7] and record["max_episode_steps"] == 2 and record["truncated"]
    assert replay(io.StringIO(out.getvalue())).ok


@given(
    actions=st.lists(
        st.one_of(st.text(max_size=40), st.sampled_from(["<answer>Up</answer>", "<answer>Left || Down</answer>"])),
        min_size=1,
        max_size=5,
    )
)
def test_record_episode__any_responses_are_written_and_replay(actions):
    out = io.StringIO()
    env = RecordEpisode(gym.make("TurnSokoban-v0"), out, observations=True)
    env.reset(seed=2)
    for action in actions:
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    env.close()
    text = out.getvalue()
    text.encode("utf-8")  # lone surrogates in a response are escaped, so the line is valid UTF-8
    (record,) = read_records(io.StringIO(text))
    assert record["actions"] == actions[: len(record["actions"])]
    assert replay(io.StringIO(text)).ok


@pytest.mark.parametrize(
    "line, words",
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not an episode record"),
        (json.dumps({"format": FORMAT, "version": 99}), "versions up to 1"),
        ("[" * 200_000, "nested too deeply"),
        ('{"format": ' + "9" * 5_000 + "}", "cannot be read"),
    ],
)
def test_read_records__a_bad_line_names_its_number_and_the_problem(line, words):
    stream = io.StringIO("\n" + line + "\n")
    with pytest.raises(RecordFormatError, match=rf"line 2: .*{words}"):
        list(read_records(stream))


# ---------------------------------------------------------------------------------------------- rescore
def _patch_sokoban(monkeypatch, name: str, value: int) -> None:
    """Set a reward constant of agentgym_turn.sokoban wherever a loaded module reads it."""
    import agentgym_turn.sokoban.env  # noqa: F401  (loads the modules that read the constants)

    patched = [m for n, m in sys.modules.items() if n.startswith("agentgym_turn.sokoban") and hasattr(m, name)]
    assert patched, name
    for module in patched:
        monkeypatch.setattr(module, name, value)


@pytest.fixture(scope="module")
def sokoban_records(tmp_path_factory):
    """Expert and random Sokoban episodes (moves, invalid turns, solved and unsolved episodes) in one file,
    and per turn the moves it played, read from info as the episodes ran."""
    folder = tmp_path_factory.mktemp("sokoban")
    lines, moves = [], []
    for policy in ("expert", "random"):
        path = folder / f"{policy}.jsonl"
        record_episodes("TurnSokoban-8x8-v0", 12, path, policy=policy, seed=20)
        lines += path.read_text(encoding="utf-8").splitlines(keepends=True)
    path = folder / "all.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    env = gym.make("TurnSokoban-8x8-v0")
    for record in read_records(path):
        env.reset(seed=record["seed"])
        moves.append([len(env.step(a)[4]["executed_moves"]) for a in record["actions"]])
    return path, moves


def test_rescore__unchanged_code_reports_no_change(sokoban_records):
    path, moves = sokoban_records
    report = rescore(path)
    assert report.changes == [] and report.unplayable == []
    assert report.episodes == len(moves) and report.turns == sum(len(m) for m in moves)


def test_rescore__a_bigger_move_penalty_changes_exactly_the_turns_that_moved(sokoban_records, monkeypatch):
    path, moves = sokoban_records
    records = list(read_records(path))
    expected = {(e, t + 1) for e, per_turn in enumerate(moves) for t, n in enumerate(per_turn) if n > 0}
    assert 0 < len(expected) < sum(len(m) for m in moves)  # invalid turns stay unchanged
    _patch_sokoban(monkeypatch, "STEP_TENTHS", -2)
    report = rescore(path)
    assert {(c.episode, c.turn) for c in report.changes} == expected
    for c in report.changes:
        n = moves[c.episode][c.turn - 1]
        assert c.recorded_reward == records[c.episode]["rewards"][c.turn - 1]
        assert c.reward == pytest.approx(c.recorded_reward - 0.1 * n, abs=1e-9)
        assert c.components["step"] == pytest.approx(c.recorded_components["step"] - 0.1 * n, abs=1e-9)


def test_rescore__a_new_finish_bonus_changes_exactly_the_solving_turns(sokoban_records, monkeypatch):
    path, _ = sokoban_records
    records = list(read_records(path))
    expected = {(e, len(r["actions"])) for e, r in enumerate(records) if r["success"]}
    assert 0 < len(expected) < len(records)
    _patch_sokoban(monkeypatch, "SOLVED_TENTHS", 50)
    report = rescore(path)
    assert {(c.episode, c.turn) for c in report.changes} == expected
    assert all(c.reward == pytest.approx(c.recorded_reward - 5.0, abs=1e-9) for c in report.changes)
    assert report.unplayable == []
