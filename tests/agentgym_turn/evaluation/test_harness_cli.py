"""agentgym-turn eval's command line: mistakes are one line and exit 2; --card rebuilds a card from its files."""

from __future__ import annotations

import json

import pytest

from agentgym_turn.cli import main
from agentgym_turn.evaluation import evaluate, protocol_for

from .test_harness import ScriptedPlayer


@pytest.mark.parametrize(
    "argv, says",
    [
        (["eval", "TurnSokoban-v0"], "exactly one of --model"),
        (
            ["eval", "TurnSokoban-v0", "--endpoint", "http://127.0.0.1:9", "--protocol", "search-r1"],
            "written for TurnSearchQA-v0",
        ),
        (
            ["eval", "TurnSokoban-v0", "--endpoint", "http://127.0.0.1:9", "--env-kwargs", '{"bogus": 1}'],
            "refused the --env-kwargs",
        ),
        (["eval", "TurnSokoban-v0", "--endpoint", "http://127.0.0.1:9", "--env-kwargs", "[1]"], "takes a JSON object"),
        (["eval", "TurnSokoban-v0", "--endpoint", "http://127.0.0.1:9", "--episodes", "0"], "at least 1"),
        (["eval", "TurnSokoban-v0", "--model", "no-such-model-here"], "neither a known name"),
        (["eval"], "name an env id"),
    ],
)
def test_eval_cli__a_mistake_is_one_line_and_exit_2(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and err.count("\n") == 0


def test_eval_cli__card_rebuilds_the_card_from_the_files(tmp_path, capsys):
    card = evaluate(ScriptedPlayer(), protocol_for("default", "TurnSokoban-v0", episodes=2), tmp_path, progress=False)
    (tmp_path / "card.json").unlink()
    assert main(["eval", "--card", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "card.json").read_text()) == card
    assert "| model |" in capsys.readouterr().out
