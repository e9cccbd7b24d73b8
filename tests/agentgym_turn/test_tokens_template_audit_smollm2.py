"""audit_template with a real tokenizer: SmolLM2-135M-Instruct's (byte-level BPE, GPT-2's pre-tokenizer, ChatML).

Over every id of ``env_ids()``, 8 expert episodes of up to 6 turns with ``<think>`` blocks: the incremental ids equal the
re-rendered template at every turn, except in search QA. There Search-R1's information block opens with a blank line
(``"\\n\\n<information>"``) after the user header's ``"\\n"``: rendered as one text, GPT-2's pre-tokenizer splits the three
newlines as ``"\\n\\n" + "\\n"`` (a whitespace run before a non-space keeps its last character apart), ids ``[1116, 198]``;
the incremental ids encode the header and the content apart, ``"\\n"`` then ``"\\n" + "\\n"``: ``[198, 198, 198]``
(``docs/tokens.md``, "A real tokenizer: SmolLM2-135M-Instruct"). Every divergence is pinned here, where it is and what it is.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401 - registers the env ids
from agentgym_turn.chat import ChatView
from agentgym_turn.registration import env_ids
from agentgym_turn.searchqa.protocol import INVALID_MESSAGE
from agentgym_turn.tokens import ROLE_OBSERVATION, ROLE_TEMPLATE, audit_template
from support.real_model import smollm2_tokenizer

EPISODES = 8
MAX_TURNS = 6
NEWLINE, TWO_NEWLINES, LT = 198, 1116, 44  # "\n", "\n\n", "<" in SmolLM2's vocabulary

#: Per id: turns checked, and the divergences as ``(episode, turn, position, char)``.
SEARCH_QA = [
    (0, 1, 171, 680),
    (1, 1, 169, 688),
    (2, 1, 156, 688),
    (3, 1, 162, 677),
    (3, 2, 162, 677),
    (4, 1, 163, 720),
    (5, 1, 169, 717),
    (5, 2, 169, 717),
    (6, 1, 156, 675),
    (6, 2, 156, 675),
    (7, 1, 176, 716),
    (7, 2, 176, 716),
]
SEARCH_QA_MCQ = [
    (0, 1, 210, 743),
    (1, 1, 208, 751),
    (2, 1, 187, 763),
    (3, 1, 201, 740),
    (3, 2, 201, 740),
    (4, 1, 201, 833),
    (5, 1, 199, 791),
    (5, 2, 199, 791),
    (6, 1, 186, 752),
    (6, 2, 186, 752),
    (7, 1, 207, 792),
    (7, 2, 207, 792),
]
EXPECTED = {
    "TurnSokoban-v0": (11, []),
    "TurnSokoban-8x8-v0": (18, []),
    "TurnSokoban-10x10-v0": (24, []),
    "TurnWebShop-v0": (37, []),
    "TurnWebShopDialog-v0": (48, []),
    "TurnSearchQA-v0": (20, SEARCH_QA),
    "TurnSearchQA-MCQ-v0": (20, SEARCH_QA_MCQ),
}
SEARCH_IDS = ("TurnSearchQA-v0", "TurnSearchQA-MCQ-v0")
DETAIL = (
    "equal texts, but the re-render's tokens span the boundary before observation 1 (a user message) "
    "(incremental [198, 198, 198], rendered [1116, 198, 44])"
)


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


def test_every_id_is_pinned():
    assert sorted(EXPECTED) == sorted(env_ids())


@pytest.mark.parametrize("env_id", list(EXPECTED))
def test_smollm2s_template_against_the_incremental_ids(tokenizer, env_id):
    report = audit_template(tokenizer, env_id=env_id, episodes=EPISODES, max_turns=MAX_TURNS)
    turns, expected = EXPECTED[env_id]
    assert report.turns_checked == turns
    assert [(d.episode, d.turn, d.position, d.char) for d in report.divergences] == expected, report.summary()
    for d in report.divergences:
        # the first search's results, at every later turn too: the header's "\n" and the content's "\n\n"
        assert d.kind == "whitespace_merged" and d.detail == DETAIL
        assert d.incremental == d.rendered and d.incremental.endswith(
            '<|im_end|>\n<|im_start|>user\n\n\n<information>Doc 1(Title: "'
        )
    if not expected:
        assert report.ok


def _user_contents(view):
    """``(turn, index of its first content token)`` of every user message after the first."""
    starts = {}
    for i, (role, turn) in enumerate(zip(view.roles, view.turn_ids)):
        if role == ROLE_OBSERVATION and turn >= 1 and turn not in starts:
            starts[turn] = i
    return sorted(starts.items())


def _as_rendered(view, messages):
    """The incremental ids with what the re-render changes applied: at each user message that opens with a blank line,
    the header's ``"\\n"`` and the content's two ``"\\n"`` (``[198, 198, 198]``) become ``"\\n\\n" + "\\n"`` (``[1116, 198]``)."""
    ids, merged = list(view.ids), 0
    for turn, start in reversed(_user_contents(view)):
        if messages[2 * turn + 1]["content"].startswith("\n\n"):
            assert view.roles[start - 1] == ROLE_TEMPLATE and ids[start - 1 : start + 3] == [
                NEWLINE,
                NEWLINE,
                NEWLINE,
                LT,
            ]
            ids[start - 1 : start + 2] = [TWO_NEWLINES, NEWLINE]
            merged += 1
    return ids, merged


@pytest.mark.parametrize("env_id", SEARCH_IDS)
def test_in_search_qa_the_re_render_differs_only_in_the_blank_line_before_each_information_block(tokenizer, env_id):
    """At every turn of expert episodes, the re-render's ids are the incremental ids with each information block's leading
    newlines re-tokenised (one token fewer per block); the responses' ids are the same, one token earlier per block."""
    blocks = 0
    for seed in range(EPISODES):
        env = gym.make(env_id)
        try:
            chat = ChatView(env, tokenizer=tokenizer)
            chat.reset(seed=seed)
            for _ in range(MAX_TURNS):
                view = chat.tokens()
                rendered = tokenizer.apply_chat_template(chat.messages, tokenize=False, add_generation_prompt=True)
                expected, merged = _as_rendered(view, chat.messages)
                assert tokenizer.encode(rendered, add_special_tokens=False) == expected
                assert merged == sum(
                    m["content"].startswith("\n\n<information>") for m in chat.messages if m["role"] == "user"
                )
                blocks += merged
                _, _, terminated, truncated, _ = chat.step(env.unwrapped.expert_action())
                if terminated or truncated:
                    break
        finally:
            env.close()
    assert blocks > EPISODES  # every episode searched at least once


@pytest.mark.parametrize("env_id", SEARCH_IDS)
def test_search_qas_invalid_action_message_renders_alike(tokenizer, env_id):
    # It opens with one "\n": after the header's, "\n\nMy" splits as "\n" + "\n" rendered whole too (no merge).
    env = gym.make(env_id)
    try:
        chat = ChatView(env, tokenizer=tokenizer)
        chat.reset(seed=0)
        chat.step("I am not sure.")
        assert chat.messages[-1]["content"] == INVALID_MESSAGE
        rendered = tokenizer.apply_chat_template(chat.messages, tokenize=False, add_generation_prompt=True)
        assert tokenizer.encode(rendered, add_special_tokens=False) == chat.tokens().ids
    finally:
        env.close()
