"""Templates that rewrite history (Qwen3's, R1-distill's, harmony's), and the two reasoning policies: ``keep`` (the ids
as sampled, one sequence) and ``strip`` (earlier reasoning dropped as the template drops it, a new sequence at each
rewrite). ChatView and the trainer's rollouts assemble the same sequences under every template and policy; under
``strip`` each sequence is exactly what the model was given at the turns it trains, and the history it shows is the
template's own text."""

from __future__ import annotations

import copy
import re
import zlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401 - registers the env ids
from agentgym_turn.chat import ChatView
from agentgym_turn.pools import SerialPool
from agentgym_turn.tokens import ROLE_ACTION, ChatFormat, ChatTemplateError, TokenEpisode, audit_template
from reference_trainer.rollout import collect
from support import chat_templates as ct
from support.paths import ROOT
from support.real_model import smollm2_tokenizer

MAKERS = {
    "Qwen3-style": lambda base: ct.qwen3_tokenizer(base, official=True),
    "R1-style": ct.r1_tokenizer,
    "harmony-style": ct.harmony_tokenizer,
    "ChatML": copy.deepcopy,
    "Llama 3": ct.llama3_tokenizer,
}
REWRITING = ("Qwen3-style", "R1-style", "harmony-style")
POLICIES = ("keep", "strip")
MAX_TURNS = 3
MAX_NEW = 24
ACTIONS = ["<answer>Up</answer>", "search[red shoes]", "click[buy now]", "<answer> B </answer>", "  spaced  ", ""]
THOUGHTS = ["the box is left", "", " look again \n", "</think> twice"]


@pytest.fixture(scope="module")
def base():
    return ct.tiny_tokenizer()


@pytest.fixture(scope="module")
def formats(base):
    return {name: ChatFormat(make(base)) for name, make in MAKERS.items()}


class ThinkingPolicy:
    """Responses that are a function of the prompt's ids alone (a generator seeded by their CRC), so two assemblies
    that give the same prompts get the same responses: the family's reasoning markup as its model samples it, the
    same response cut at the token budget or with the markup written one character per token (the marker then as plain
    text), random ids (any token, markers and stops included), or a plain answer; a stop id ends a response."""

    def __init__(self, fmt: ChatFormat):
        self.fmt, self.vocab = fmt, len(fmt.tokenizer)
        self._made: dict[tuple[int, str, str], list[int]] = {}

    def _make(self, kind: int, thought: str, answer: str) -> list[int]:
        fmt = self.fmt
        if kind == 0:
            return fmt.reasoning_response(thought, answer)
        if kind == 1:
            return fmt.reasoning_response(thought * 9, answer)  # cut inside the reasoning or the answer
        if kind == 2:
            text = fmt.decode_response(fmt.reasoning_response(thought, answer))
            return [i for ch in text for i in fmt.encode_content(ch)] + fmt.encode_response("")[-1:]
        return fmt.encode_response(answer)

    def respond(self, prompt: list[int], max_new_tokens: int) -> list[int]:
        fmt = self.fmt
        rng = np.random.default_rng(zlib.crc32(np.asarray(prompt, dtype=np.int64).tobytes()))
        answer, thought = ACTIONS[int(rng.integers(len(ACTIONS)))], THOUGHTS[int(rng.integers(len(THOUGHTS)))]
        kind = int(rng.integers(5))
        if kind == 3:
            ids = [int(i) for i in rng.integers(0, self.vocab, int(rng.integers(1, max_new_tokens + 1)))]
        else:
            key = (kind, thought, answer)
            if key not in self._made:
                self._made[key] = self._make(kind, thought, answer)
            ids = list(self._made[key])
        ids = ids[:max_new_tokens]
        end = next((j + 1 for j, t in enumerate(ids) if t in fmt.stop_ids), len(ids))
        return ids[:end]

    def generate(self, prompts, *, max_new_tokens, stop_ids, pad_id, generator, temperature):
        out = [self.respond(list(p), max_new_tokens) for p in prompts]
        return out, [[0.0] * len(o) for o in out]


def _rows(samples):
    return [(s.ids, s.mask, s.roles, s.turn_ids, s.first_turn, s.sequence_start) for s in samples]


#: 1,000 episodes per template and policy: (env id, history policy, episodes), seeds from 0; Sokoban's short messages
#: keep the count affordable, WebShop's pages and search QA's passages are in it too.
CASES = [
    ("TurnSokoban-v0", None, 400),
    ("TurnSokoban-v0", 2, 250),
    ("TurnSokoban-v0", "compact", 200),
    ("TurnWebShop-v0", None, 100),
    ("TurnSearchQA-v0", 2, 50),
]


@pytest.mark.parametrize("reasoning", POLICIES)
@pytest.mark.parametrize("template", list(MAKERS))
def test_chat_view_sequences_equal_the_trainers_over_a_thousand_episodes(base, template, reasoning):
    """ChatView and the trainer's rollout (``collect``), given the same policy, give the same sequences to train on
    (ids, mask, roles, turn ids, where each starts) for 1,000 episodes; every fifth splits the system prompt off."""
    tokenizer = MAKERS[template](base)
    mismatches = episodes = sequences = turns = 0
    for env_id, history, count in CASES:
        kwargs = {"max_episode_steps": MAX_TURNS}
        for split in (False, True):
            seeds = [s for s in range(count) if (s % 5 == 0) == split]
            view = ChatView(
                gym.make(env_id, **kwargs),
                tokenizer=tokenizer,
                split_system_prompt=split,
                history_window=history,
                reasoning=reasoning,
            )
            policy = ThinkingPolicy(view.format)
            envs = SerialPool([gym.make(env_id, **kwargs) for _ in range(8)])
            played = collect(
                policy,
                view.format,
                envs,
                seeds,
                generator=torch.Generator(),
                max_new_tokens=MAX_NEW,
                max_context_tokens=10**7,
                split_system_prompt=split,
                history=history,
                reasoning=reasoning,
            )
            envs.close()
            for seed, ep in zip(seeds, played):
                view.reset(seed=seed)
                while True:
                    _, _, terminated, truncated, _ = view.step(policy.respond(view.tokens().ids, MAX_NEW))
                    if terminated or truncated:
                        break
                mine = _rows(view.samples())
                mismatches += mine != _rows(ep.tokens.samples())
                episodes += 1
                sequences += len(mine)
                turns += ep.num_turns
            view.close()
    assert episodes == 1000 and mismatches == 0
    assert turns >= 2 * episodes  # episodes went on past their first turn
    if reasoning == "strip" and template in REWRITING:
        assert sequences > 1.5 * episodes  # rewrites started new sequences


# ---------------------------------------------------------------------- for any response ids
def _episode(fmt, responses, history=None, reasoning="strip"):
    episode = TokenEpisode(fmt, history, reasoning=reasoning)
    episode.open("Find the box.", "Push boxes onto targets.", state="state 0")
    for k, ids in enumerate(responses):
        episode.respond(ids, fmt.decode_response(ids))
        episode.observe(f"Reward: -0.1\nstate {k + 1}\n", state=f"state {k + 1}")
    return episode


def _response_ids(fmt):
    """Any ids: markers, stops and plain tokens, the family's own reasoning response, or pieces of it."""
    vocab = len(fmt.tokenizer)
    whole = st.builds(lambda r, a: fmt.reasoning_response(r, a), st.sampled_from(THOUGHTS), st.sampled_from(ACTIONS))
    anything = st.lists(st.integers(0, vocab - 1), max_size=12)
    cut = st.tuples(whole, st.integers(0, 30)).map(lambda t: t[0][: t[1]])
    return st.one_of(whole, anything, cut, st.tuples(whole, anything).map(lambda t: t[1] + t[0]))


@pytest.mark.parametrize("history", [None, 2, "compact"])
@pytest.mark.parametrize("template", REWRITING + ("ChatML",))
@given(data=st.data())
def test_every_sequence_is_what_the_model_was_given_at_the_turns_it_trains(formats, template, history, data):
    fmt = formats[template]
    responses = data.draw(st.lists(_response_ids(fmt), min_size=1, max_size=5), label="responses")
    episode = _episode(fmt, responses, history)
    trained = []
    for sample in episode.samples():
        for span in sample.turns:
            if span.response is not None and span.turn >= sample.sequence_start:
                start, end = span.response
                k = span.turn
                assert sample.ids[:start] == episode.view(k).ids  # the input the response was sampled from
                assert sample.ids[start:end] == responses[k]
                assert episode.sequence_start(k) == sample.sequence_start
                trained.append(k)
        # mask 1 exactly on the responses sampled in this sequence
        expected = [int(r == ROLE_ACTION and t >= sample.sequence_start) for r, t in zip(sample.roles, sample.turn_ids)]
        assert sample.mask == expected
    assert sorted(trained) == list(range(len(responses)))  # each response trained once


@pytest.mark.parametrize("template", REWRITING)
@given(data=st.data())
def test_the_stripped_history_is_the_templates_own_text(formats, template, data):
    """For any response ids, the input under ``strip`` decodes to what the template renders for the same messages."""
    fmt = formats[template]
    responses = data.draw(st.lists(_response_ids(fmt), min_size=1, max_size=4), label="responses")
    episode = _episode(fmt, responses)
    conversation = episode.conversation
    messages = fmt.messages(conversation.observations, conversation.responses, "Push boxes onto targets.")
    rendered = fmt.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert fmt._decode(episode.view().ids) == rendered


@pytest.mark.parametrize("template", REWRITING)
@given(thought=st.text(max_size=20), answer=st.text(max_size=20))
def test_a_response_in_the_familys_markup_keeps_sampled_ids_alone_in_the_history(formats, template, thought, answer):
    fmt = formats[template]
    sampled = fmt.reasoning_response(thought, answer)
    kept, _ = fmt.history_response(sampled)
    ends = [kept == sampled[len(sampled) - len(kept) :], kept == sampled[len(sampled) - len(kept) - 1 : -1]]
    assert any(ends)  # the ids after the marker (harmony: without the <|return|> its history writes as <|end|>)


@pytest.mark.parametrize("template", list(MAKERS))
def test_keep_is_one_sequence_of_the_ids_as_sampled(formats, template):
    fmt = formats[template]
    responses = [fmt.reasoning_response(t, a) for t, a in zip(THOUGHTS, ACTIONS)]
    episode = _episode(fmt, responses, reasoning="keep")
    (whole,) = episode.samples()
    assert whole.ids == episode.conversation.ids and sum(whole.mask) == sum(map(len, responses))
    stripped = _episode(fmt, responses).samples()
    assert len(stripped) == (len(responses) if template in REWRITING else 1)  # a new sequence after each rewrite


# ---------------------------------------------------------------------- each family's rule, read from its template
def test_each_family_s_rule_is_read_from_its_template(formats):
    qwen3, r1, harmony = (formats[n] for n in REWRITING)
    tok = qwen3.tokenizer
    assert (qwen3.reasoning_rule.marker, qwen3.reasoning_rule.lstrip) == ("</think>", "\n")
    assert (r1.reasoning_rule.marker, r1.reasoning_rule.lstrip) == ("</think>", "")
    assert harmony.reasoning_rule.marker == "<|channel|>final<|message|>"
    assert formats["ChatML"].reasoning_rule is None and formats["Llama 3"].reasoning_rule is None
    # R1's generation prompt opens the think block: its model writes no <think> of its own
    assert r1._decode(r1.prompt_pieces("x")[-1][0]).endswith("<think>\n") and r1.reasoning_rule.open == ""
    # final-turn rule: a response known as text is written as the template writes a final assistant message
    for fmt in (qwen3, harmony, formats["ChatML"]):
        messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<answer>Up</answer>"}]
        final = fmt.tokenizer.apply_chat_template(messages, tokenize=False)
        prompt = fmt.tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
        assert prompt + fmt._decode(fmt.encode_response("<answer>Up</answer>")) == final.rstrip("\n")
    assert tok.decode(qwen3.encode_response("A")) == "<think>\n\n</think>\n\nA<|im_end|>"
    assert harmony._decode(harmony.encode_response("A")) == "<|channel|>final<|message|>A<|return|>"
    # harmony's history ends an answer with <|end|> where the model stopped on <|return|>: <|end|> is no stop
    assert harmony._decode(harmony.history_suffix) == "<|end|>" and harmony.stop_ids == {harmony.assistant_suffix[0]}


def test_a_rewrite_strip_cannot_follow_raises_and_says_what_to_do(base):
    tokenizer = ct.qwen3_tokenizer(base)
    tokenizer.chat_template = tokenizer.chat_template.replace(
        "content.split('</think>')[-1].lstrip('\\n')", "content.split('</think>')[-1][1:]"
    )
    fmt = ChatFormat(tokenizer)
    assert fmt.strip_problem and "reasoning='keep'" in fmt.strip_problem
    TokenEpisode(fmt)  # keep needs no rule
    with pytest.raises(ChatTemplateError, match="reasoning='keep'"):
        TokenEpisode(fmt, reasoning="strip")
    with pytest.raises(ChatTemplateError, match="cannot follow"):
        ChatView(gym.make("TurnSokoban-v0"), tokenizer=tokenizer, reasoning="strip")
    with pytest.raises(ValueError, match="reasoning must be"):
        TokenEpisode(fmt, reasoning="drop")


def test_a_response_whose_marker_is_plain_text_keeps_its_sampled_ids_after_it(formats):
    fmt = formats["Qwen3-style"]
    text = "<think>\nok\n</think>\n\nLeft"
    split = [i for ch in text for i in fmt.encode_content(ch)] + fmt.encode_response("")[-1:]
    assert fmt.reasoning_rule.marker_ids[0] not in split  # "</think>" written one character per token
    kept, tail = fmt.history_response(split)
    assert kept == split[-5:] and fmt._decode(kept) == "Left<|im_end|>"  # "L", "e", "f", "t" as sampled
    assert fmt._decode(tail) == "\n"


# ---------------------------------------------------------------------- the audit, per template and policy
AUDIT_EPISODES, AUDIT_TURNS = 8, 6


def _audits(makers, base):
    out = {}
    for name, make in makers.items():
        tokenizer = make(base)
        for reasoning in POLICIES:
            for env_id in ct.TINY_ENVS:
                out[name, reasoning, env_id] = audit_template(
                    tokenizer, env_id=env_id, episodes=AUDIT_EPISODES, max_turns=AUDIT_TURNS, reasoning=reasoning
                )
    return out


def _cell(report) -> str:
    kinds = ", ".join(k.replace("_", " ") for k in sorted(report.counts()))
    return f"{len(report.divergences)} of {report.turns_checked}" + (f", {kinds}" if kinds else "")


def _table(page: str, heading: str) -> dict[tuple[str, str], list[str]]:
    section = page.split(heading, 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (keep|strip) \|(.*)\|$", section, re.M)
    return {(name, policy): [c.strip() for c in cells.split("|")] for name, policy, cells in rows}


def test_the_audit_finds_each_rewrite_at_the_first_token_it_changes_and_the_docs_say_so(base):
    audits = _audits(MAKERS, base)
    page = (ROOT / "docs" / "tokens.md").read_text(encoding="utf-8")
    table = _table(page, "### Templates that rewrite history")
    for name in MAKERS:
        for reasoning in POLICIES:
            cells = [_cell(audits[name, reasoning, env_id]) for env_id in ct.TINY_ENVS]
            assert table[name, reasoning] == cells, (name, reasoning)
            for env_id in ct.TINY_ENVS:
                report = audits[name, reasoning, env_id]
                if reasoning == "strip" or name not in REWRITING:
                    assert report.ok, report.summary()
                    continue
                assert {d.kind for d in report.divergences} == {"history_rewritten"}
                for d in report.divergences:
                    _check_first_changed_token(name, MAKERS[name](base), env_id, d)


def _check_first_changed_token(name, tokenizer, env_id, d):
    """Where the ids as sampled first differ from the history the template writes (under ``strip`` the audit finds
    none: that history is the template's own): Qwen3's first sampled token, R1's generation-prompt ``<think>``, the
    channel harmony's model wrote after ``<|channel|>``. Every later turn of the episode parts at the same token."""
    env = gym.make(env_id)
    chat = ChatView(env, tokenizer=tokenizer)
    chat.reset(seed=d.episode)
    prompt = chat.tokens().ids  # response 0 starts after it
    env.close()
    if name == "Qwen3-style":
        assert d.position == len(prompt) and "response 0" in d.detail
        assert "assistant\n<think>" in d.incremental and "<think>" not in d.rendered
    elif name == "R1-style":
        assert d.position == len(prompt) - 2 and "the generation prompt of response 0" in d.detail
        assert tokenizer.convert_ids_to_tokens(prompt[-2:]) == ["<think>", "Ċ"]
    elif env_id == "TurnSearchQA-v0":  # its expert writes its own <think> line: no analysis, only the end changes
        assert d.position > len(prompt) + 1 and "response 0" in d.detail
        # the texts part after the "<|" the two tags share (the snippets hold 30 characters before it)
        assert d.incremental[28:].startswith("<|return|>") and d.rendered[28:].startswith("<|end|>")
    else:
        assert d.position == len(prompt) + 1 and "response 0" in d.detail
        assert "<|channel|>analysis" in d.incremental and "<|channel|>final" in d.rendered


# ---------------------------------------------------------------------- a real tokenizer: SmolLM2's, template swapped
def test_smollm2_with_each_family_s_template():
    makers = {n: MAKERS[n] for n in REWRITING}
    audits = _audits(makers, smollm2_tokenizer())
    page = (ROOT / "docs" / "tokens.md").read_text(encoding="utf-8")
    table = _table(page, "### The same templates on SmolLM2's tokenizer")
    for name in makers:
        for reasoning in POLICIES:
            assert table[name, reasoning] == [_cell(audits[name, reasoning, e]) for e in ct.TINY_ENVS]


def test_an_instruction_that_quotes_a_special_think_token_is_a_token_split():
    """The env's instructions quote ``<think>...</think>``; encoded as content they stay plain text, while a re-render
    makes them the special tokens a thinking model samples: the audit reports a token split in the system message."""
    tokenizer = ct.think_special_tokenizer(smollm2_tokenizer())
    report = audit_template(tokenizer, env_id="TurnWebShop-v0", episodes=2, max_turns=2)
    assert {d.kind for d in report.divergences} == {"token_split"}
    for d in report.divergences:
        assert "inside the system message" in d.detail and "<think>" in d.incremental[30:]
        think = tokenizer.convert_tokens_to_ids("<think>")
        assert f"{think}]" in d.detail or f"{think}," in d.detail  # the re-render's side holds the special token
