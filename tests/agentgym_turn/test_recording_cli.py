"""`agentgym-turn record | replay | rescore | view`: exit statuses, what they print, and one-line errors."""

from __future__ import annotations

import json

import pytest

from agentgym_turn.cli import main
from agentgym_turn.recording import read_records


@pytest.fixture
def recorded(tmp_path, capsys):
    path = tmp_path / "sokoban.jsonl"
    assert (
        main(
            ["record", "TurnSokoban-8x8-v0", "--episodes", "3", "--out", str(path), "--policy", "random", "--seed", "4"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("wrote 3 episodes of TurnSokoban-8x8-v0 (") and str(path) in out
    return path


def test_record__writes_the_episodes_with_observations_and_the_given_kwargs(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    assert (
        main(
            [
                "record",
                "TurnSokoban-v0",
                "--episodes",
                "2",
                "--out",
                str(path),
                "--seed",
                "7",
                "--env-kwargs",
                '{"dim": [7, 7]}',
            ]
        )
        == 0
    )
    records = list(read_records(path))
    assert [r["seed"] for r in records] == [7, 8] and all(r["env_kwargs"]["dim"] == [7, 7] for r in records)
    assert all(len(r["observations"]) == len(r["actions"]) + 1 for r in records)
    assert "2 successes, expert policy" in capsys.readouterr().out


def test_record__no_observations_keeps_only_hashes(tmp_path):
    path = tmp_path / "r.jsonl"
    assert main(["record", "TurnSearchQA-v0", "--episodes", "1", "--out", str(path), "--no-observations"]) == 0
    (record,) = read_records(path)
    assert "observations" not in record and len(record["observation_hashes"]) == len(record["actions"]) + 1


def test_replay__exit_0_when_nothing_differs(recorded, capsys):
    assert main(["replay", str(recorded)]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "0 of 3 episodes differ ("
            + str(sum(len(r["actions"]) for r in read_records(recorded)))
            + " turns replayed)."
        )
    )


def test_replay__exit_1_and_the_first_difference_of_each_differing_episode(recorded, capsys):
    records = list(read_records(recorded))
    records[0]["rewards"][0] += 1.0
    records[2]["observation_hashes"][1] = "f" * 64
    recorded.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["replay", str(recorded)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("episode 0 (TurnSokoban-8x8-v0, seed 4): turn 1: reward recorded ")
    assert lines[1].startswith("episode 2 (TurnSokoban-8x8-v0, seed 6): turn 1: observation_hash recorded 'fff")
    assert lines[2].startswith("2 of 3 episodes differ")


def test_rescore__exit_0_with_the_changed_turns_and_a_count(recorded, capsys):
    records = list(read_records(recorded))
    records[1]["rewards"][0] += 1.0
    recorded.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["rescore", str(recorded)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("episode 1, turn 1: reward ")
    assert lines[1].startswith("1 changed turns of ")


def test_view__writes_a_page_with_every_episode(recorded, tmp_path, capsys):
    page = tmp_path / "out" / "page.html"
    assert main(["view", str(recorded), "--out", str(page)]) == 0
    assert str(page) in capsys.readouterr().out
    assert page.read_text(encoding="utf-8").count('<section id="episode-') == 3


@pytest.mark.parametrize("command", [["replay"], ["rescore"], ["view", "--out", "x.html"]])
def test_a_missing_record_file_is_one_line_saying_how_to_write_one(command, tmp_path, capsys):
    missing = str(tmp_path / "none.jsonl")
    assert main([command[0], missing, *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no record file {missing!r}" in err and "agentgym-turn record ID" in err


def test_a_file_that_is_not_a_record_is_one_line_naming_the_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"format": "agentgym-turn/episode", "version": 1}\nnot json\n', encoding="utf-8")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2: not JSON" in err


@pytest.mark.parametrize(
    "kwargs, words",
    [("{dim", "is not JSON"), ("[1, 2]", "takes a JSON object"), ('{"dimm": 3}', "refused the --env-kwargs")],
)
def test_record__bad_env_kwargs_are_one_line(kwargs, words, tmp_path, capsys):
    assert (
        main(
            ["record", "TurnSokoban-v0", "--episodes", "1", "--out", str(tmp_path / "r.jsonl"), "--env-kwargs", kwargs]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err
    assert not (tmp_path / "r.jsonl").exists()


def test_record__a_misspelt_id_is_one_line_with_a_suggestion(tmp_path, capsys):
    assert main(["record", "TurnSokobn-v0", "--episodes", "1", "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "Did you mean 'TurnSokoban-v0'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("actions", 5, "'actions' must be a list of actions"),
        ("rewards", ["x"], "'rewards' must be a list of finite numbers (item 0 is 'x')"),
        ("rewards", [], "0 rewards for"),
        ("seed", "zero", "'seed' must be an integer or null"),
        ("env_kwargs", [1], "'env_kwargs' must be an object or null"),
        ("observation_hashes", [1, 2], "'observation_hashes' must be a list of strings"),
        ("reward_components", [{"a": "b"}], "'reward_components' must be a list of objects of numbers"),
        ("terminated", "yes", "'terminated' must be true or false"),
    ],
)
@pytest.mark.parametrize("command", [["replay"], ["rescore"], ["view", "--out", "x.html"]])
def test_a_record_with_a_field_of_the_wrong_type_is_one_line_naming_the_record_and_the_field(
    recorded, tmp_path, capsys, command, field, value, words
):
    records = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines()]
    records[1][field] = value
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main([command[0], str(path), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2: field" in err or "line 2: 0 rewards" in err, err
    assert words in err and "Traceback" not in err


class _Listener:
    """A loopback socket that counts the connections made to it (never answering)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url, self.connections, self._stop = f"http://127.0.0.1:{self.sock.getsockname()[1]}", 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.mark.parametrize("command", ["replay", "rescore"])
@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("TurnSearchQA-v0", {"retriever_url": "URL"}),
        ("agentgym_turn/Remote-v0", {"base_url": "URL"}),
        ("TurnWebShop-v0", {"data_path": "/etc/passwd"}),
        ("TurnSokoban-v0", {"levels": "/etc"}),
    ],
)
def test_a_record_naming_a_server_or_a_path_is_refused_unless_allowed(tmp_path, capsys, command, env_id, kwargs):
    listener = _Listener()
    try:
        kwargs = {k: (listener.url if v == "URL" else v) for k, v in kwargs.items()}
        record = {
            "format": "agentgym-turn/episode",
            "version": 1,
            "env_id": env_id,
            "env_kwargs": kwargs,
            "seed": 0,
            "options": None,
            "actions": ["<search>x</search>"],
            "observation_hashes": ["0", "0"],
            "rewards": [0.0],
            "terminated": False,
            "truncated": False,
        }
        path = tmp_path / "crafted.jsonl"
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--allow-external" in err and list(kwargs)[0] in err
        assert listener.connections == 0
        main([command, str(path), "--allow-external"])  # told to: the record's env is made (and fails or differs)
        assert "--allow-external" not in capsys.readouterr().err
    finally:
        listener.close()
