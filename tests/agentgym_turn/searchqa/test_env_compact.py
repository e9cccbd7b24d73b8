"""TurnSearchQA's compact passages (``passage_sentences=N``): an opt-in style for small context windows."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.searchqa.corpus import first_sentences, split_contents
from agentgym_turn.searchqa.protocol import information_block
from agentgym_turn.testing import check_turn_env


def test_first_sentences__cuts_the_text_after_the_nth_sentence_and_keeps_the_title():
    contents = '"Aldo Tavesk"\nAldo Tavesk was a poet. He was born in Merrow in 1850. He said "no." Then he left!'
    assert first_sentences(contents, 1) == '"Aldo Tavesk"\nAldo Tavesk was a poet.'
    assert (
        first_sentences(contents, 3)
        == '"Aldo Tavesk"\nAldo Tavesk was a poet. He was born in Merrow in 1850. He said "no."'
    )
    assert first_sentences(contents, 4) == contents
    assert first_sentences(contents, 9) == contents


@given(st.text(max_size=300), st.integers(1, 6))
def test_first_sentences__is_a_prefix_with_the_title_line_intact(contents, n):
    cut = first_sentences(contents, n)
    assert contents.startswith(cut)
    assert split_contents(cut)[0] == split_contents(contents)[0]


def test_first_sentences__rejects_a_non_positive_count():
    with pytest.raises(ValueError, match="n must be"):
        first_sentences('"T"\nA. B.', 0)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_passage_sentences__invalid_values_are_refused_with_the_parameter_named(bad):
    with pytest.raises(ValueError, match="passage_sentences"):
        gym.make("TurnSearchQA-v0", passage_sentences=bad)


def test_passage_sentences__shows_each_passage_cut_and_the_default_is_unchanged():
    full = gym.make("TurnSearchQA-v0").unwrapped
    compact = gym.make("TurnSearchQA-v0", passage_sentences=2).unwrapped
    for env in (full, compact):
        env.reset(seed=3)
    query = full.question.hops[0].queries[0]
    obs_full, *_ = full.step(f"<search> {query} </search>")
    obs_compact, *_ = compact.step(f"<search> {query} </search>")
    hits = full._retriever.retrieve([query], 3)[0]
    assert obs_full == information_block(h.document.contents for h in hits)
    assert obs_compact == information_block(first_sentences(h.document.contents, 2) for h in hits)
    assert len(obs_compact) < len(obs_full)


def test_passage_sentences__keeps_the_turn_contract():
    # topk=3 so that every expert episode of the checked seeds finds its evidence (the checker requires success)
    check_turn_env(lambda: gym.make("TurnSearchQA-v0", passage_sentences=4, topk=3), episodes=3, fuzz_actions=16)


def _expert_play(env: gym.Env, seed: int) -> tuple[list[str], dict]:
    env.reset(seed=seed)
    responses, done, info = [], False, {}
    while not done:
        responses.append(env.unwrapped.expert_action())
        _, _, terminated, truncated, info = env.step(responses[-1])
        done = terminated or truncated
    return responses, info


def test_expert_think_off__gives_the_same_actions_without_the_think_line():
    thinking, plain = gym.make("TurnSearchQA-v0"), gym.make("TurnSearchQA-v0", expert_think=False)
    for seed in range(8):
        with_think, info_think = _expert_play(thinking, seed)
        without, info_plain = _expert_play(plain, seed)
        assert [r.split("</think>\n", 1)[1] for r in with_think] == without
        assert all("<think>" not in r for r in without)
        assert info_plain["success"] == info_think["success"]


def test_expert_think_off__keeps_the_turn_contract():
    check_turn_env(
        lambda: gym.make("TurnSearchQA-v0", expert_think=False, passage_sentences=3), episodes=3, fuzz_actions=16
    )


def test_expert_recall__answers_the_named_templates_at_once_and_searches_the_rest():
    recall = ["birth_year", "founder"]
    oracle = gym.make("TurnSearchQA-v0", question_types=["single_hop"], expert_think=False)
    memory = gym.make("TurnSearchQA-v0", question_types=["single_hop"], expert_think=False, expert_recall=recall)
    templates = set()
    for seed in range(40):
        searched, _ = _expert_play(oracle, seed)
        answered, info = _expert_play(memory, seed)
        template = memory.unwrapped.question.template
        templates.add(template)
        if template in recall:  # one turn, the gold answer, no search: right on the world it was demonstrated on
            assert answered == [f"<answer> {memory.unwrapped.question.golden_answers[0]} </answer>"]
            assert info["success"] and len(searched) > 1
        else:
            assert answered == searched
    assert set(recall) <= templates and templates - set(recall)


def test_expert_recall_rate__answers_that_share_of_the_recalled_questions_from_memory_fixed_per_question():
    kwargs = dict(question_types=["single_hop"], expert_think=False, expert_recall=["birth_year", "founded"])
    first_turn = {}
    for rate in (0.0, 0.3, 0.7, 1.0):
        env = gym.make("TurnSearchQA-v0", expert_recall_rate=rate, **kwargs)
        direct = []
        for seed in range(200):
            env.reset(seed=seed)
            q = env.unwrapped.question
            if q.template in ("birth_year", "founded"):
                direct.append(env.unwrapped.expert_action().startswith("<answer>"))
                first_turn.setdefault(rate, {})[q.id] = direct[-1]
        share = sum(direct) / len(direct)
        assert abs(share - rate) < 0.15, (rate, share, len(direct))
    # a question answered from memory at a lower rate is answered from memory at every higher one
    assert all(first_turn[0.7][i] for i, d in first_turn[0.3].items() if d)
    again = gym.make("TurnSearchQA-v0", expert_recall_rate=0.3, **kwargs)
    for qid, d in list(first_turn[0.3].items())[:10]:
        again.reset(options={"question_id": qid})
        assert again.unwrapped.expert_action().startswith("<answer>") == d


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True])
def test_expert_recall_rate__out_of_range_values_are_refused_with_the_parameter_named(bad):
    with pytest.raises(ValueError, match="expert_recall_rate"):
        gym.make("TurnSearchQA-v0", expert_recall=["birth_year"], expert_recall_rate=bad)


@pytest.mark.parametrize("bad", [["no_such_template"], ["birth_year", "single_hop"]])
def test_expert_recall__unknown_template_names_are_refused_with_the_parameter_named(bad):
    with pytest.raises(ValueError, match="expert_recall"):
        gym.make("TurnSearchQA-v0", expert_recall=bad)


def test_expert_recall__keeps_the_turn_contract():
    check_turn_env(
        lambda: gym.make("TurnSearchQA-v0", expert_recall=["birthplace"], passage_sentences=3, topk=3),
        episodes=3,
        fuzz_actions=16,
    )
