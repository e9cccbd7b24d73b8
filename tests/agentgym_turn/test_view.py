"""The episode page (agentgym_turn/view.py): escaped, self-contained, one section per episode and one row per
turn, read back in headless Chromium as a person sees it."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest

from agentgym_turn.recording import read_records, record_episodes
from agentgym_turn.view import render_view, write_view


@pytest.fixture(scope="module")
def records_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("view") / "episodes.jsonl"
    record_episodes("TurnWebShop-v0", 3, path, policy="random", seed=1)
    return path


def test_view__every_text_is_escaped_and_the_page_loads_nothing(records_file):
    records = list(read_records(records_file))
    records[0]["actions"][0] = "<script>alert(1)</script> & <b>"
    records[0]["observations"][0] = "<img src=x onerror=alert(2)>"
    page = render_view(records)
    assert "<script>" not in page and "<img" not in page
    assert html.escape("<script>alert(1)</script> & <b>") in page

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.attributes = set(), set()

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            self.attributes.update(name for name, _ in attrs)

    parsed = Tags()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img", "link", "iframe", "object", "b"}
    assert not parsed.attributes & {"src", "href", "onerror", "onload"}


def test_view__observations_not_recorded_are_shown_by_their_hash(records_file):
    records = list(read_records(records_file))
    for r in records:
        del r["observations"]
    page = render_view(records)
    for r in records:
        for digest in r["observation_hashes"]:
            assert f"(not recorded; hash {digest})" in page


def test_view__in_chromium_each_episode_is_a_section_with_a_row_per_turn(records_file, tmp_path):
    pytest.importorskip("selenium")
    from agentgym_turn.webshop.browser import find_chromium

    try:
        find_chromium()
    except RuntimeError as err:  # `make test` installs chromium + chromium-driver; elsewhere say what is missing
        pytest.skip(str(err))
    from selenium.webdriver.common.by import By

    from agentgym_turn.view import headless_chromium

    records = list(read_records(records_file))
    page = write_view(records_file, tmp_path / "page.html")
    with headless_chromium() as driver:
        driver.get(page.resolve().as_uri())
        sections = driver.find_elements(By.CSS_SELECTOR, "section.episode")
        assert len(sections) == len(records)
        for section, record in zip(sections, records):
            header = section.find_element(By.CSS_SELECTOR, "h2").text
            assert record["env_id"] in header and f"seed {record['seed']}" in header
            rows = section.find_elements(By.CSS_SELECTOR, "tbody tr.turn")
            assert len(rows) == len(record["actions"])
            for row, action, observation in zip(rows, record["actions"], record["observations"]):
                cells = row.find_elements(By.TAG_NAME, "td")
                assert cells[2].get_attribute("textContent") == action
                assert cells[1].get_attribute("textContent") == observation
            final = section.find_element(By.CSS_SELECTOR, "tbody tr.final td:nth-child(2)")
            assert final.get_attribute("textContent") == record["observations"][-1]
            assert section.find_element(By.CSS_SELECTOR, "pre").is_displayed()
