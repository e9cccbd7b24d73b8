"""The command line: one-line errors, a quiet closed pipe, and a play loop driven by piped stdin."""

import io
import re
import subprocess
import sys

import pytest

import agentgym_turn
from agentgym_turn import cli
from agentgym_turn.cli import build_parser, main
from agentgym_turn.core.args import parse_kwargs


def test_cli_help_lists_the_commands():
    out = subprocess.run(
        [sys.executable, "-m", "agentgym_turn", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("list", "play", "check", "serve"):
        assert command in out


def test_cli_help__serve_names_every_server():
    help_text = " ".join(build_parser().format_help().split())  # argparse wraps lines
    assert set(cli.SERVERS) == {"retriever", "webshop", "env"}
    for name in cli.SERVERS:
        assert f"{name}: " in help_text, f"`agentgym-turn --help` does not name the {name!r} server"


def test_parse_kwargs_casts_values():
    assert parse_kwargs(["a=1", "b=0.5", "c=text", "d=true", "e=None"]) == {
        "a": 1,
        "b": 0.5,
        "c": "text",
        "d": True,
        "e": None,
    }


def test_a_kwarg_without_a_value_is_one_line_and_exit_2(capsys):
    assert main(["play", "TurnSokoban-v0", "--kwarg", "levels"]) == 2
    assert "--kwarg takes NAME=VALUE, got 'levels'" in capsys.readouterr().err


def test_serve_passes_its_own_arguments_through():
    args = build_parser().parse_args(["serve", "retriever", "--port", "8001", "--generated"])
    assert args.target == "retriever" and args.server_args == ["--port", "8001", "--generated"]


def test_list__a_reader_that_leaves_early_gets_no_traceback():
    # The read end is closed before the child has imported anything, so its first write hits
    # a closed pipe every time (the `agentgym-turn list | head -0` case, without the race).
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym_turn", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert stderr == ""


def test_list__prints_every_registered_id_with_its_turn_limit_and_needs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.match(r"id\s+turns\s+needs\s+entry point$", lines[0])
    ids = agentgym_turn.registration.all_env_ids()
    assert [line.split()[0] for line in lines[1:]] == ids
    assert set(agentgym_turn.env_ids()) < set(ids) and {"TurnWebShopBrowser-v0", "agentgym_turn/Remote-v0"} < set(ids)
    for env_id in agentgym_turn.env_ids():
        assert re.search(rf"^{re.escape(env_id)}\s+\d+\s+-\s+agentgym_turn\.", out, re.M)
    assert re.search(
        r"^TurnWebShopBrowser-v0\s+15\s+extra browser \+ Chromium\s+agentgym_turn\.webshop\.browser:", out, re.M
    )
    assert re.search(
        r"^agentgym_turn/Remote-v0\s+-\s+a served env \(base_url\)\s+agentgym_turn\.remote\.client:", out, re.M
    )


@pytest.mark.parametrize("command", ["check", "play"])
def test_misspelt_id__one_line_with_the_id_known_ids_and_a_suggestion(command, capsys):
    assert main([command, "TurnSokobn-v0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "'TurnSokobn-v0'" in lines[0] and "Did you mean 'TurnSokoban-v0'?" in lines[0]
    for env_id in agentgym_turn.registration.all_env_ids():
        assert env_id in lines[0]


def test_misspelt_id__in_a_fresh_process_is_one_line_too():
    result = subprocess.run(
        [sys.executable, "-m", "agentgym_turn", "check", "TurnWebShp-v0"], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Did you mean 'TurnWebShop-v0'?" in result.stderr


def test_play__bad_kwarg_is_one_line(capsys):
    assert main(["play", "TurnSokoban-v0", "--kwarg", "num_boxes=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "num_boxes" in err


def _play(monkeypatch, capsys, lines, *argv):
    """Run ``agentgym-turn play`` with ``lines`` as stdin; return (exit status, stdout)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    status = main(["play", *argv])
    return status, capsys.readouterr().out


def _status_lines(out):
    return re.findall(r"^\[Turn (\d+)/(\d+) \| reward ([-+.\d]+) \| return ([-+.\d]+)", out, re.M)


def test_play__local_commands_cost_no_turn_and_are_never_sent(monkeypatch, capsys):
    status, out = _play(
        monkeypatch,
        capsys,
        [":help", ":render", ":expert", ":frobnicate", "garbage", ":quit", "never read"],
        "TurnSokoban-v0",
    )
    assert status == 0
    assert ":render" in out and "costs no turn" in out  # the help text
    assert "Unknown command ':frobnicate'; nothing was sent" in out
    assert "<answer>" in out.split("Unknown command")[0]  # :expert showed a response
    # exactly one turn was played: the garbage line
    assert _status_lines(out) == [("1", "5", "-0.100", "-0.100")]
    assert "Turn 2/5> " in out


def test_play__auto_lets_the_expert_play_and_solves_the_level(monkeypatch, capsys):
    status, out = _play(monkeypatch, capsys, [":auto"] * 5, "TurnSokoban-v0", "--seed", "1")
    assert status == 0
    assert "(expert) <answer>" in out and "success True" in out
    assert "Episode over (task over). Starting the next one (seed 2)." in out


def test_play__turn_display_never_passes_the_registered_limit(monkeypatch, capsys):
    status, out = _play(monkeypatch, capsys, ["garbage"] * 7, "TurnSokoban-v0")
    assert status == 0
    turns = [(int(k), int(n)) for k, n, *_ in _status_lines(out)]
    assert turns == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (1, 5), (2, 5)]
    prompts = [(int(k), int(n)) for k, n in re.findall(r"Turn (\d+)/(\d+)> ", out)]
    assert prompts and all(k <= n == 5 for k, n in prompts)
    assert "Episode over (turn limit of 5 reached)." in out


def test_play__turn_limit_follows_an_overridden_max_episode_steps(monkeypatch, capsys):
    status, out = _play(monkeypatch, capsys, ["garbage"] * 3, "TurnSokoban-v0", "--kwarg", "max_episode_steps=2")
    assert [(k, n) for k, n, *_ in _status_lines(out)] == [("1", "2"), ("2", "2"), ("1", "2")]
    assert "(2 turns an episode)" in out


def test_play__double_colon_sends_a_response_that_starts_with_a_colon(monkeypatch, capsys):
    import gymnasium as gym

    sent = []

    original_step = gym.wrappers.TimeLimit.step

    def spy(self, action):
        sent.append(action)
        return original_step(self, action)

    monkeypatch.setattr(gym.wrappers.TimeLimit, "step", spy)
    _play(monkeypatch, capsys, ["::help", "a\\nb", ":q"], "TurnSokoban-v0")
    assert sent == [":help", "a\nb"]


def test_play__line_editing_is_enabled_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.delitem(sys.modules, "readline", raising=False)
    pytest.importorskip("readline")  # platforms without readline keep plain input()
    monkeypatch.delitem(sys.modules, "readline", raising=False)
    cli._enable_line_editing()
    assert "readline" in sys.modules
