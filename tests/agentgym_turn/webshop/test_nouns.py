"""WebShop's title nouns: spaCy's tagger (the ``spacy`` extra, which ``make test`` installs) and the
rule that stands in without it, and which one an env uses."""

import json
import sys

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.extras import MissingExtraError
from agentgym_turn.webshop import nouns
from agentgym_turn.webshop.reward import title_nouns
from support.paths import DATA

_NEEDS = "the test install has the 'spacy' extra: pip install -e '.[spacy]' (make test installs it)"


def _saved_tags() -> dict[str, list[str]]:
    """Titles and the nouns goal.py's spaCy gave them, as the two fixtures recorded them."""
    pairs = json.loads((DATA / "webshop_title_nouns.json").read_text(encoding="utf-8"))
    saved = dict(zip(pairs["titles"], pairs["spacy_nouns"]))
    saved.update(json.loads((DATA / "webshop_reward_agreement.json").read_text(encoding="utf-8"))["title_nouns"])
    return saved


def test_spacy_tags_titles_as_goal_py_did_when_the_fixtures_were_recorded():
    assert nouns.spacy_model_name() is not None, _NEEDS
    saved = _saved_tags()
    assert len(saved) > 1200
    differ = [t for t, want in saved.items() if nouns.spacy_title_nouns(t) != want]
    # measured: 0 of 1,257; a float tie may flip one tag on another CPU
    assert len(differ) <= 0.005 * len(saved), differ[:5]


def test_auto_takes_spacy_when_installed_and_names_it():
    assert nouns.spacy_model_name() is not None, _NEEDS
    fn, label = nouns.noun_tagger("auto")
    assert fn is nouns.spacy_title_nouns and label.startswith("spacy en_core_web_sm 3.8")
    assert nouns.noun_tagger("rule") == (title_nouns, "rule")
    assert nouns.noun_tagger("spacy")[0] is nouns.spacy_title_nouns


def test_without_spacy_auto_is_the_rule_and_spacy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)
    assert nouns.spacy_model_name() is None
    assert nouns.noun_tagger("auto") == (title_nouns, "rule")
    with pytest.raises(
        MissingExtraError, match=r"^title_nouns='spacy' needs the 'spacy' extra: pip install 'agentgym-turn\[spacy\]'"
    ) as raised:
        gym.make("TurnWebShop-v0", num_products=50, title_nouns="spacy")
    assert raised.value.extra == "spacy" and "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="title_nouns must be one of"):
        gym.make("TurnWebShop-v0", num_products=50, title_nouns="nltk")


def test_a_model_that_fails_to_load_ends_the_turn_as_an_env_error_saying_what_to_do(monkeypatch):
    import spacy

    def broken(*args, **kwargs):
        raise OSError("[E050] Can't find model")

    monkeypatch.setattr(nouns, "_nlp", None)
    monkeypatch.setattr(spacy, "load", broken)
    nouns._spacy_nouns.cache_clear()  # titles tagged by earlier tests would not reach the loader
    try:
        env = gym.make("TurnWebShop-v0", num_products=100, title_nouns="spacy")
        env.reset(seed=0)
        for _ in range(15):
            observation, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            if terminated or truncated:
                break
    finally:
        nouns._spacy_nouns.cache_clear()
    assert info["exit_status"] == "env_error" and not info["reward_valid"] and reward == 0.0
    assert "did not load (OSError: [E050]" in observation and "title_nouns='rule'" in observation


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=200), st.text(alphabet="ab .-'’", min_size=5_000, max_size=30_000)))
def test_spacy_title_nouns_answer_any_string(title):
    got = nouns.spacy_title_nouns(title)
    tagged = title[: nouns.MAX_TITLE_CHARS].lower()
    assert isinstance(got, list) and all(isinstance(w, str) and w and w in tagged for w in got)


@pytest.mark.parametrize("choice", ["auto", "rule"])
def test_the_env_names_its_tagger_and_the_expert_buys_right_under_it(choice):
    env = gym.make("TurnWebShop-v0", num_products=1000, goal_split="test", title_nouns=choice)
    want = nouns.noun_tagger(choice)[1]
    assert env.unwrapped.noun_tagger == want
    wins = 0
    for g in range(40):
        env.reset(seed=g, options={"goal_index": g})
        for _ in range(15):
            _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            if terminated or truncated:
                break
        assert terminated and info["reward_breakdown"]["noun_tagger"] == want
        wins += info["success"]
    assert wins >= 39  # the expert's 98% floor over 500 goals (test_env.py), on 40
