"""Each env page shows its env's info keys and arguments as the env's docstring states them (one home per fact)."""

from __future__ import annotations

import sys

import pytest

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import make_env_pages  # noqa: E402


@pytest.mark.parametrize("page", sorted(make_env_pages.PAGES))
def test_the_page_shows_the_docstring_as_it_is_now(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert make_env_pages.render(text, make_env_pages.PAGES[page]) == text, (
        f"docs/{page} is stale: run python docs/make_env_pages.py"
    )


def test_a_page_section_without_markers_gets_the_docstring_under_its_heading():
    page = "# Env\n\n## Information\n\nA page-only note.\n\n## Arguments\n\n## Speed\n"
    out = make_env_pages.render(page, "agentgym_turn.sokoban.env:TurnSokobanEnv")
    info = out.split("## Information")[1].split("## Arguments")[0]
    assert "`boxes_on_target`" in info and info.index("<!-- end of docstring -->") < info.index("A page-only note.")
    assert "`max_actions_per_turn`" in out.split("## Arguments")[1].split("## Speed")[0]
    assert (
        make_env_pages.render(out, "agentgym_turn.sokoban.env:TurnSokobanEnv") == out
    )  # rendering twice changes nothing
