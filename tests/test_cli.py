import subprocess
import sys

from agentgym_turn.cli import _parse_kwargs, build_parser


def test_cli_help_lists_the_commands():
    out = subprocess.run([sys.executable, "-m", "agentgym_turn", "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("list", "play", "check", "serve"):
        assert command in out


def test_parse_kwargs_casts_values():
    assert _parse_kwargs(["a=1", "b=0.5", "c=text", "d=true", "e=None"]) == {"a": 1, "b": 0.5, "c": "text", "d": True, "e": None}


def test_serve_passes_its_own_arguments_through():
    args = build_parser().parse_args(["serve", "retriever", "--port", "8001", "--generated"])
    assert args.target == "retriever" and args.server_args == ["--port", "8001", "--generated"]
