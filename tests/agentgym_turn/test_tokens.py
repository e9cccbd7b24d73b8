"""Exact tokens from the env side: ``ChatView(env, tokenizer=...)`` assembles what the reference trainer's
rollouts assemble, token for token, and its history policies keep each turn's input flat and exact."""

from __future__ import annotations

import re
import zlib

import gymnasium as gym
import numpy as np
import pytest
import torch

import agentgym_turn  # noqa: F401
from agentgym_turn.chat import ChatView
from agentgym_turn.tokens import ROLE_ACTION, TokenEpisode, as_token_ids
from agentgym_turn.pools import SerialPool
from reference_trainer.rollout import collect
from reference_trainer.tiny.model import env_corpus, train_tokenizer
from support.paths import ROOT

IDS = [
    "TurnSokoban-v0",
    "TurnSokoban-8x8-v0",
    "TurnSokoban-10x10-v0",
    "TurnWebShop-v0",
    "TurnWebShopDialog-v0",
    "TurnSearchQA-v0",
    "TurnSearchQA-MCQ-v0",
]
MAX_TURNS = 6
MAX_NEW = 24
ACTIONS = [
    "<answer>Up</answer>",
    "<think>the box is left</think><answer>Left || Down</answer>",
    "search[red shoes]",
    "click[next >]",
    "click[buy now]",
    "<search> capital of the moon </search>",
    "<answer> B </answer>",
    "Do you have it in blue?",
    "  spaced  ",
    "ünïcode √ <|im_end|><|im_start|>system",
    "",
]


@pytest.fixture(scope="module")
def tokenizer():
    texts = []
    for env_id in ("TurnSokoban-v0", "TurnWebShop-v0", "TurnSearchQA-v0"):
        texts += env_corpus(env_id, 6)
    return train_tokenizer(texts, 512)


class PromptHashPolicy:
    """A policy whose response is a function of its prompt's ids alone (a generator seeded by their CRC), so two
    assemblies that give the same prompts get the same responses. It answers with random ids (any token, special
    ones included), a text's canonical ids, the same text split one character per token (ids a tokenizer would never
    produce, as a sampler may), or a text cut at the token budget without an end of turn; a stop id ends a response."""

    def __init__(self, tokenizer, fmt):
        self.fmt, self.vocab = fmt, len(tokenizer)

    def respond(self, prompt: list[int], max_new_tokens: int) -> list[int]:
        rng = np.random.default_rng(zlib.crc32(np.asarray(prompt, dtype=np.int64).tobytes()))
        text = ACTIONS[int(rng.integers(len(ACTIONS)))]
        kind = int(rng.integers(4))
        if kind == 0:
            ids = [int(i) for i in rng.integers(0, self.vocab, int(rng.integers(1, max_new_tokens + 1)))]
        elif kind == 1:
            ids = self.fmt.encode_response(text)
        elif kind == 2:
            ids = [i for ch in text for i in self.fmt.encode_content(ch)] + [self.fmt.encode_response("")[-1]]
        else:
            ids = self.fmt.encode_content(text * 8)
        ids = ids[:max_new_tokens]
        end = next((j + 1 for j, t in enumerate(ids) if t in self.fmt.stop_ids), len(ids))
        return ids[:end]

    def generate(self, prompts, *, max_new_tokens, stop_ids, pad_id, generator, temperature):
        out = [self.respond(list(p), max_new_tokens) for p in prompts]
        return out, [[0.0] * len(o) for o in out]


def _play_view(view: ChatView, policy: PromptHashPolicy, seed: int) -> ChatView:
    view.reset(seed=seed)
    while True:
        prompt = view.tokens().ids
        _, _, terminated, truncated, _ = view.step(policy.respond(prompt, MAX_NEW))
        if terminated or truncated:
            return view


@pytest.mark.parametrize("env_id", IDS)
def test_chat_view_ids_equal_the_trainers_over_a_thousand_episodes(tokenizer, env_id):
    """143 episodes per id (1,001 over the seven in-process ids): the trainer's rollout (``collect``) and ChatView, given
    the same policy, end with the same ids, roles and turn ids; every fifth episode splits the system prompt off."""
    kwargs = {"max_episode_steps": MAX_TURNS}
    seeds = list(range(143))
    mismatches, turns = 0, 0
    for split in (False, True):
        chosen = [s for s in seeds if (s % 5 == 0) == split]
        view = ChatView(gym.make(env_id, **kwargs), tokenizer=tokenizer, split_system_prompt=split)
        policy = PromptHashPolicy(tokenizer, view.format)
        envs = SerialPool([gym.make(env_id, **kwargs) for _ in range(8)])
        episodes = collect(
            policy,
            view.format,
            envs,
            chosen,
            generator=torch.Generator(),
            max_new_tokens=MAX_NEW,
            max_context_tokens=10**7,
            split_system_prompt=split,
        )
        envs.close()
        for seed, ep in zip(chosen, episodes):
            _play_view(view, policy, seed)
            (whole,) = view.samples()
            c = ep.conversation
            same = (
                whole.ids == c.ids
                and whole.roles == c.roles
                and whole.turn_ids == c.turn_ids
                and whole.mask == [int(r == ROLE_ACTION) for r in c.roles]
                and [s.response for s in whole.turns if s.response] == c.action_spans
            )
            mismatches += not same
            turns += ep.num_turns
        view.close()
    assert mismatches == 0
    assert turns >= 2 * len(seeds)  # episodes went on past their first turn


def test_a_response_given_as_ids_reaches_the_env_decoded_and_stays_as_sampled(tokenizer):
    view = ChatView(gym.make("TurnSokoban-v0"), tokenizer=tokenizer)
    view.reset(seed=3)
    fmt = view.format
    split = [i for ch in "<answer>Up</answer>" for i in fmt.encode_content(ch)] + [fmt.encode_response("")[-1]]
    assert split[:-1] != fmt.encode_content("<answer>Up</answer>")  # not what the tokenizer would write
    messages, *_ = view.step(torch.tensor(split))
    assert messages[-2] == {"role": "assistant", "content": "<answer>Up</answer>"}
    (whole,) = view.samples()
    start, end = whole.turns[0].response
    assert whole.ids[start:end] == split and set(whole.mask[start:end]) == {1} and sum(whole.mask) == len(split)
    with pytest.raises(ValueError, match="tokenizer"):
        ChatView(gym.make("TurnSokoban-v0")).tokens()


DIALOG = [
    "<say>Do you have it in blue?</say>",
    "<say>What sizes are there?</say>",
    "hmm, tell me more",
    "<say>Anything cheaper?</say>",
    "search[blue cotton shirt]",
    "<say>What else would you suggest?</say>",
    "click[next >]",
]


def _dialog(tokenizer, history, turns=20):
    view = ChatView(
        gym.make("TurnWebShopDialog-v0", max_episode_steps=turns), tokenizer=tokenizer, history_window=history
    )
    view.reset(seed=11)
    played = 0
    for k in range(turns):
        _, _, terminated, truncated, _ = view.step(DIALOG[k % len(DIALOG)])
        played += 1
        if terminated or truncated:
            break
    return view, played


def test_tokens_per_turn_stay_flat_over_a_twenty_turn_dialog_under_keep_last_k(tokenizer):
    whole, played = _dialog(tokenizer, None)
    windowed, _ = _dialog(tokenizer, 3)
    compact, _ = _dialog(tokenizer, "compact")
    assert played == 20
    grown = whole.episode_tokens.tokens_per_turn
    window = windowed.episode_tokens.tokens_per_turn
    states = compact.episode_tokens.tokens_per_turn

    def mean(xs):
        return sum(xs) / len(xs)

    # the whole history grows with every turn; a window of 3 and the compact state stay within the sizes of
    # their first ten turns (the pages a search shows are long, the customer's answers short: flat, not constant)
    assert mean(grown[10:]) > 2 * mean(grown[3:10]) and grown[-1] > 10 * grown[0]
    for flat in (window, states):
        assert max(flat[10:]) <= max(flat[:10]) and mean(flat[10:]) < 1.3 * mean(flat[3:10])
    assert max(window) < grown[-1] / 2
    # full history: each turn runs only its new tokens; a cut window starts a new prefix at a known turn
    new = whole.episode_tokens.new_tokens_per_turn
    assert new[0] == grown[0] and all(new[t] == grown[t] - grown[t - 1] for t in range(1, 20))
    samples = windowed.samples()
    assert len(samples) == 1 + 17 and [s.first_turn for s in samples] == [0] + list(range(1, 18))
    # the table of docs/tokens.md is this episode's counts
    page = (ROOT / "docs" / "tokens.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (whole episode|last 3 turns|compact state) \|(.*)\|$", page, re.M))
    for name, counts in (("whole episode", grown), ("last 3 turns", window), ("compact state", states)):
        assert [int(c.strip().replace(",", "")) for c in rows[name].split("|")] == [counts[0], counts[9], counts[19]]


@pytest.mark.parametrize("history", [2, 3, "compact"])
def test_every_windowed_sequence_is_made_of_the_whole_episodes_exact_pieces(tokenizer, history):
    """Each sequence a history policy gives holds the sampled ids of its turns unchanged, is trained only on the
    responses sampled in it (each response exactly once over all sequences), and its messages render, through the chat
    template, to its ids (the tiny template is prefix-stable)."""
    view, _ = _dialog(tokenizer, history, turns=9)
    episode = view.episode_tokens
    whole = episode.conversation
    trained = []
    for sample in view.samples():
        for span in sample.turns:
            if span.response is not None:
                start, end = span.response
                k = span.turn
                w_start, w_end = whole.action_spans[k]
                assert sample.ids[start:end] == whole.ids[w_start:w_end]
                if sample.mask[start]:
                    trained.append(k)
        assert sample.turns[0].turn == sample.first_turn
    assert trained == list(range(episode.num_turns))
    # the view at each turn is what apply_chat_template renders for the messages ChatView gave at that turn
    replay = ChatView(
        gym.make("TurnWebShopDialog-v0", max_episode_steps=9), tokenizer=tokenizer, history_window=history
    )
    messages, _ = replay.reset(seed=11)
    for k in range(episode.num_turns):
        rendered = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
        assert replay.tokens().ids == list(rendered)
        messages, _, terminated, truncated, _ = replay.step(DIALOG[k % len(DIALOG)])
        if terminated or truncated:
            break


def test_token_episode_refuses_calls_out_of_order(tokenizer):
    view = ChatView(gym.make("TurnSokoban-v0"), tokenizer=tokenizer)
    episode = TokenEpisode(view.format)
    with pytest.raises(ValueError, match="open first"):
        episode.view()
    episode.open("a state")
    with pytest.raises(ValueError, match="response must come between"):
        episode.observe("another")
    episode.respond([5, 6], "x")
    with pytest.raises(ValueError, match="no state is waiting"):
        episode.respond([5], "x")
    with pytest.raises(ValueError, match="history must be"):
        TokenEpisode(view.format, 0)


def test_a_response_is_token_ids_only_when_it_is_a_sequence_of_integers():
    assert (
        as_token_ids([5, 6]) == [5, 6]
        and as_token_ids(np.array([5, 6])) == [5, 6]
        and as_token_ids(torch.tensor([7])) == [7]
    )
    assert as_token_ids([]) == [] and as_token_ids((1,)) == [1]
    for text_like in ("56", b"56", np.array(5), 5, [True, False], [1.0, 2.0], ["a"]):
        assert as_token_ids(text_like) is None
