"""audit_template against chat templates in the main model families' formats, built offline on the tiny tokenizer."""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401 - registers the env ids
from agentgym_turn.chat import ChatView
from agentgym_turn.tokens import DIVERGENCE_KINDS, Divergence, TemplateAudit, audit_template
from agentgym_turn.tokens import ROLE_OBSERVATION
from support import chat_templates as ct

ENVS = ct.TINY_ENVS
MAKERS = {"tiny": copy.deepcopy, "qwen25": ct.qwen25_tokenizer, "llama3": ct.llama3_tokenizer}
EPISODES = 3
MAX_TURNS = 4


@pytest.fixture(scope="module")
def base():
    return ct.tiny_tokenizer()


def _audit(tokenizer, env_id, **kwargs):
    kwargs.setdefault("episodes", EPISODES)
    kwargs.setdefault("max_turns", MAX_TURNS)
    return audit_template(tokenizer, env_id=env_id, **kwargs)


def _first_prompt(tokenizer, env_id, seed):
    """The incremental input at turn 0 of the episode reset with ``seed``."""
    env = gym.make(env_id)
    try:
        chat = ChatView(env, tokenizer=tokenizer)
        chat.reset(seed=seed)
        return chat.tokens()
    finally:
        env.close()


CLEAN = [(maker, env_id) for maker in ("tiny", "qwen25", "llama3") for env_id in ENVS]


@pytest.mark.parametrize("maker,env_id", CLEAN)
def test_prefix_stable_templates_match_the_incremental_ids_at_every_turn(base, maker, env_id):
    tokenizer = MAKERS[maker](base)
    report = _audit(tokenizer, env_id)
    assert report.ok, report.summary()
    assert report.turns_checked > EPISODES  # some episodes last more than one turn
    assert report.episodes == EPISODES and report.env_id == env_id
    assert "no divergence" in report.summary()


@pytest.mark.parametrize("maker", ["tiny", "qwen25", "llama3"])
@pytest.mark.parametrize("split", [True, False])
def test_a_system_prompt_of_our_own_renders_alike(base, maker, split):
    tokenizer = MAKERS[maker](base)
    report = _audit(
        tokenizer, "TurnSokoban-v0", episodes=2, split_system_prompt=split, system_prompt="You are a helpful assistant."
    )
    assert report.ok, report.summary()


def test_the_format_trims_message_content_where_llama3s_template_does(base):
    # TurnSearchQA's first state ends with "\n", later results start and end with blank lines: Llama 3's template
    # trims every message, and ChatFormat encodes content as the template renders it, so the two stay equal.
    assert ChatView(gym.make("TurnSokoban-v0"), tokenizer=ct.llama3_tokenizer(base)).format.content_strip == "both"
    assert ChatView(gym.make("TurnSokoban-v0"), tokenizer=ct.qwen25_tokenizer(base)).format.content_strip is None


def test_a_template_that_rewrites_content_in_a_way_the_format_cannot_follow_is_found(base):
    # A template that folds blank lines into one newline: TurnSearchQA's results begin with a blank line.
    tokenizer = copy.deepcopy(base)
    tokenizer.chat_template = tokenizer.chat_template.replace(
        "message['content']", "(message['content'] | replace('\\n\\n', '\\n'))"
    )
    assert "replace" in tokenizer.chat_template
    report = _audit(tokenizer, "TurnSearchQA-v0")
    assert report.divergences and {d.kind for d in report.divergences} == {"content_changed"}
    for d in report.divergences:
        prompt = _first_prompt(tokenizer, "TurnSearchQA-v0", d.episode)
        assert d.position >= len(prompt.ids)  # the first prompt has no blank line; a later observation's does
        assert d.detail


@pytest.mark.parametrize("env_id", ENVS)
def test_qwen3_drops_the_first_think_block_from_the_history(base, env_id):
    tokenizer = ct.qwen3_tokenizer(base)
    report = _audit(tokenizer, env_id)
    assert {d.kind for d in report.divergences} == {"history_rewritten"}
    assert all(d.turn >= 1 for d in report.divergences)  # the first prompt has no history to rewrite
    by_episode: dict[int, list[Divergence]] = {}
    for d in report.divergences:
        by_episode.setdefault(d.episode, []).append(d)
    assert by_episode, "no episode lasted two turns"
    assert len(report.divergences) == report.turns_checked - EPISODES  # every turn after the first
    for episode, found in by_episode.items():
        assert found[0].turn == 1
        response_start = len(_first_prompt(tokenizer, env_id, episode))  # the action span of turn 0 starts here
        for d in found:
            assert d.position == response_start
            assert "response 0" in d.detail
            assert "assistant\n<think>" in d.incremental and "assistant\n<think>" not in d.rendered


def test_qwen3_without_thinking_matches_when_responses_hold_no_think_block(base):
    assert _audit(ct.qwen3_tokenizer(base), "TurnSokoban-v0", think=False).ok


@pytest.mark.parametrize("official", [False, True])
def test_qwen3s_rewrite_is_followed_under_the_strip_policy(base, official):
    # ChatFormat now reads Qwen3's rule from its template (its final-turn empty think block included): the history it
    # writes under reasoning="strip" is the re-render at every turn, where "keep" parts at response 0's <think>.
    tokenizer = ct.qwen3_tokenizer(base, official=official)
    keep = _audit(tokenizer, "TurnSokoban-v0")
    assert keep.divergences and {d.kind for d in keep.divergences} == {"history_rewritten"}
    assert _audit(tokenizer, "TurnSokoban-v0", reasoning="strip").ok


def test_a_rewrite_the_strip_policy_cannot_follow_is_reported_not_raised(base):
    # A template that numbers the assistant messages writes the history differently from turn to turn.
    report = _audit(ct.turn_numbered_tokenizer(base), "TurnSokoban-v0", reasoning="strip")
    (d,) = report.divergences
    assert d.kind == "template" and d.episode == -1 and report.turns_checked == 0
    assert "reasoning='keep'" in d.detail and "template 1" in report.summary()


def test_whitespace_merged_across_the_user_header(base):
    # Observations after a search start with "\n\n": a Qwen2-style pre-tokenizer groups them with the header's "\n".
    tokenizer = ct.whitespace_merging_tokenizer()
    report = _audit(tokenizer, "TurnSearchQA-v0", think=False)
    assert report.divergences
    assert {d.kind for d in report.divergences} == {"whitespace_merged"}
    for d in report.divergences:
        assert d.turn == 1 and d.incremental == d.rendered
        env = gym.make("TurnSearchQA-v0")
        try:
            chat = ChatView(env, tokenizer=tokenizer)
            chat.reset(seed=d.episode)
            chat.step(env.unwrapped.expert_action())
            view = chat.tokens()
        finally:
            env.close()
        content_start = next(
            i for i, (r, t) in enumerate(zip(view.roles, view.turn_ids)) if r == ROLE_OBSERVATION and t == 1
        )
        assert d.position == content_start - 1  # the header's "\n", merged with the content's "\n\n" on re-render
        assert tokenizer.decode([view.ids[d.position]]) == "\n"
    assert _audit(tokenizer, "TurnSokoban-v0", think=False).ok  # no message there starts with whitespace


def test_a_generation_prompt_that_changes_from_turn_to_turn(base):
    report = _audit(ct.turn_numbered_tokenizer(base), "TurnWebShop-v0")
    assert report.divergences
    assert min(d.turn for d in report.divergences) == 2  # turn 1's prompt is the one the incremental ids keep
    # At turn 2 the prompt differs; from turn 3 on, so does the history (turn 2's answer followed "Turn 2:").
    assert {d.kind for d in report.divergences if d.turn == 2} == {"generation_prompt"}
    assert {d.kind for d in report.divergences if d.turn > 2} <= {"history_rewritten"}
    d = report.divergences[0]
    assert d.incremental.endswith("Turn 2:\n") and d.rendered.endswith("Turn 3:\n")


def test_a_generation_prompt_unlike_the_assistant_prefix_rewrites_the_history(base):
    report = _audit(ct.turn_numbered_tokenizer(base, in_messages=False), "TurnWebShop-v0")
    assert report.divergences
    assert {d.kind for d in report.divergences} == {"history_rewritten"}
    assert "Turn 2:\n" in report.divergences[0].incremental and "Turn 2:\n" not in report.divergences[0].rendered


def test_a_template_that_fails_to_render_later_is_reported(base):
    tokenizer = copy.deepcopy(base)
    tokenizer.chat_template = (
        "{%- if messages | length > 4 %}{{- raise_exception('too long') }}{%- endif %}" + base.chat_template
    )
    report = _audit(tokenizer, "TurnWebShop-v0")
    assert report.divergences and {d.kind for d in report.divergences} == {"template"}
    assert all(d.turn == 2 and "too long" in d.detail for d in report.divergences)


def test_a_template_that_drops_system_messages_is_reported(base):
    tokenizer = copy.deepcopy(base)
    tokenizer.chat_template = (
        "{%- for message in messages if message.role != 'system' %}"
        "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    report = _audit(tokenizer, "TurnSokoban-v0")  # the env's instructions become a system message
    (d,) = report.divergences
    assert d.kind == "template" and "system message" in d.detail
    assert _audit(tokenizer, "TurnSokoban-v0", split_system_prompt=False).ok


def test_report_is_deterministic_and_json_serialisable(base):
    tokenizer = ct.qwen3_tokenizer(base)
    a = _audit(tokenizer, "TurnWebShop-v0", seed=5)
    b = _audit(tokenizer, "TurnWebShop-v0", seed=5)
    assert a == b
    data = json.loads(json.dumps(a.to_dict()))
    assert data["ok"] is False and data["turns_checked"] == a.turns_checked
    assert data["counts"] == {"history_rewritten": len(a.divergences)}
    assert [Divergence(**d) for d in data["divergences"]] == a.divergences
    assert json.loads(a.to_json()) == data
    assert isinstance(a, TemplateAudit) and set(data["counts"]) <= set(DIVERGENCE_KINDS)
    assert "history_rewritten" in a.summary() and "response 0" in a.summary()
