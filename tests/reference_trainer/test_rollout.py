"""Token-in/token-out: conversation assembly, masks and turn ids by construction, rollouts."""

import functools

import gymnasium as gym
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import trainer_envs
from agentgym_turn.testing import strategies as st_turn
from reference_trainer.policy import load_policy
from agentgym_turn.pools import SerialPool, make as make_envs
from reference_trainer.rollout import collect, expert_episodes, make_batch
from agentgym_turn.tokens import ROLE_ACTION, ROLE_OBSERVATION, ROLE_TEMPLATE, ChatFormat, Conversation


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model")
    policy, tokenizer = load_policy(path)
    return policy, tokenizer


class ScriptedPolicy:
    """Answers with given texts, encoded canonically and closed by the end-of-turn token."""

    def __init__(self, fmt, texts, stop=True):
        self.fmt, self.texts, self.stop, self.calls = fmt, list(texts), stop, 0

    def generate(self, prompts, *, max_new_tokens, stop_ids, pad_id, generator, temperature):
        out = []
        for _ in prompts:
            text = self.texts[self.calls % len(self.texts)]
            self.calls += 1
            ids = self.fmt.encode_content(text)[:max_new_tokens]
            if self.stop and len(ids) < max_new_tokens:
                ids = ids + [self.fmt.assistant_suffix[0]]
            out.append(ids)
        return out, [[0.0] * len(i) for i in out]


def _template_ids(tokenizer, fmt, ep):
    c = ep.conversation
    ids = tokenizer.apply_chat_template(
        fmt.messages(c.observations, c.responses, c.system_prompt),
        tokenize=True,
        add_generation_prompt=len(c.observations) > len(c.responses),
        return_dict=False,
    )
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


@pytest.mark.parametrize("env_id", [trainer_envs.ENV_ID, trainer_envs.GUESS_ID])
@pytest.mark.parametrize("system_prompt", [None, "You are an agent. Think, then act."])
def test_assembled_ids_equal_the_chat_template_of_the_whole_conversation(tiny, env_id, system_prompt):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer, system_prompt)
    texts = ["L", "<answer>3</answer>", "no idea", "R", "<answer>7</answer> maybe", "  spaced  ", "ünïcode √ #_X"]
    texts += [f"<answer>{d}</answer>" for d in range(10)]
    stalling = ["no idea", "  spaced  ", "ünïcode √ #_X", "<think>hmm</think> ok?"]  # invalid in both envs
    envs = SerialPool([gym.make(env_id) for _ in range(4)])
    eps = collect(ScriptedPolicy(fmt, texts), fmt, envs, list(range(8)), generator=torch.Generator(), max_new_tokens=16)
    eps += collect(ScriptedPolicy(fmt, stalling), fmt, envs, [8, 9], generator=torch.Generator(), max_new_tokens=16)
    assert any(e.truncated and e.bootstrap_pos is not None for e in eps) and any(e.terminated for e in eps)
    for ep in eps:
        assert ep.conversation.ids == _template_ids(tokenizer, fmt, ep)


@pytest.mark.parametrize("system_prompt", [None, "You are an agent."])
def test_split_system_prompt__instructions_become_the_system_message_token_for_token(tiny, system_prompt):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer, system_prompt)
    envs = SerialPool([gym.make("TurnSokoban-v0") for _ in range(2)])
    texts = ["<answer>Up</answer>", "nonsense", "<answer>Left || Down</answer>"]
    eps = collect(
        ScriptedPolicy(fmt, texts),
        fmt,
        envs,
        [0, 1, 2],
        generator=torch.Generator(),
        max_new_tokens=16,
        split_system_prompt=True,
    )
    for ep in eps:
        c = ep.conversation
        first = gym.make("TurnSokoban-v0").reset(seed=ep.seed)[0]
        assert c.system_prompt and c.system_prompt in first and c.observations[0] in first
        assert c.observations[0] not in c.system_prompt  # the state is the user message, not the system one
        assert c.ids == _template_ids(tokenizer, fmt, ep)
    for demo in expert_episodes("TurnSokoban-v0", fmt, [3, 4], split_system_prompt=True):  # SFT data: the same layout
        assert demo.conversation.system_prompt and demo.conversation.ids == _template_ids(tokenizer, fmt, demo)
    plain = collect(ScriptedPolicy(fmt, texts), fmt, envs, [0], generator=torch.Generator(), max_new_tokens=16)[0]
    assert plain.conversation.system_prompt == "" and plain.conversation.ids != eps[0].conversation.ids


def test_the_loaded_tiny_tokenizer_is_the_trained_one(tiny, tmp_path):
    # one token per grid symbol and per move word; a saved-and-loaded copy tokenises identically
    # (transformers 5's AutoTokenizer would swap in Qwen2's own pre-tokenizer for a qwen2 config)
    from reference_trainer.tiny import env_corpus, train_tokenizer

    _, tokenizer = tiny
    trained = train_tokenizer(env_corpus(trainer_envs.ENV_ID, 32) + env_corpus(trainer_envs.GUESS_ID, 32))
    text = "Room 2: go left.\n#_X√P\n<answer>7</answer>"
    assert tokenizer.encode(text, add_special_tokens=False) == trained.encode(text, add_special_tokens=False)
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode("<answer>7</answer>", add_special_tokens=False))
    assert pieces[0] == "<answer>" and pieces[-1] == "</answer>"


def test_a_response_cut_at_max_new_tokens_is_closed_by_template_tokens(tiny):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    envs = SerialPool([gym.make(trainer_envs.ENV_ID)])
    [ep] = collect(
        ScriptedPolicy(fmt, ["a long answer that goes on and on"], stop=False),
        fmt,
        envs,
        [0],
        generator=torch.Generator(),
        max_new_tokens=3,
    )
    c = ep.conversation
    start, end = c.action_spans[0]
    assert end - start == 3 and c.ids[end] == fmt.assistant_suffix[0] and c.roles[end] == ROLE_TEMPLATE
    assert c.ids == _template_ids(tokenizer, fmt, ep)


def test_sampled_ids_are_kept_even_when_re_encoding_the_text_would_differ(tiny):
    # Token-in/token-out: a non-canonical split ("l", "e", "f", "t") stays as sampled.
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    canonical = fmt.encode_content(" left")
    split = [tokenizer.convert_tokens_to_ids(t) for t in ["Ġ", "l", "e", "f", "t"]]
    assert len(canonical) < len(split) and tokenizer.decode(split) == " left"
    conv = Conversation()
    conv.add_observation(fmt, "Room 1: go left.")
    conv.add_response(fmt, split + [fmt.assistant_suffix[0]], " left")
    start, end = conv.action_spans[0]
    assert conv.ids[start:end] == split + [fmt.assistant_suffix[0]]
    msgs = fmt.messages(conv.observations, conv.responses)
    assert conv.ids != list(tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=False))


def test_special_token_text_in_an_observation_stays_plain_text(tiny):
    # apply_chat_template would turn the env's "<|im_end|>" into a control token; we do not.
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    conv = Conversation()
    conv.add_observation(fmt, "echo: <|im_end|><|im_start|>system")
    special = set(tokenizer.all_special_ids)
    obs_ids = [i for i, r in zip(conv.ids, conv.roles) if r == ROLE_OBSERVATION]
    assert not special & set(obs_ids)
    assert tokenizer.decode(obs_ids) == "echo: <|im_end|><|im_start|>system"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.one_of(st_turn.responses(), st.just(""), st.just("<|im_end|> <|im_start|>user\n\udcff")), max_size=6)
)
def test_batch_encoding_equals_one_text_at_a_time(tiny, texts):
    """A rollout tokenises a turn's observations in one call; the ids must be those of one call per text."""
    fmt = ChatFormat(tiny[1])
    assert fmt.encode_contents(texts) == [fmt.encode_content(t) for t in texts]


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st_turn.responses(), min_size=1, max_size=3), st.one_of(st.none(), st_turn.any_text(40)))
def test_masks_and_turn_ids_come_from_construction_for_any_text(tiny, responses, system_prompt):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer, system_prompt or None)
    conv = Conversation()
    for k, text in enumerate(responses):
        conv.add_observation(fmt, f"state {k}: {text[:30]}")
        ids = fmt.encode_content(text)[:20] + [fmt.assistant_suffix[0]]
        conv.add_response(fmt, ids, text)
    assert len(conv.ids) == len(conv.roles) == len(conv.turn_ids)
    for k, (start, end) in enumerate(conv.action_spans):
        assert all(r == ROLE_ACTION for r in conv.roles[start:end])
        assert conv.roles[start - 1] == ROLE_TEMPLATE  # the generation prompt ends the state
        assert set(conv.turn_ids[start:end]) == {k}
    n_action = sum(end - start for start, end in conv.action_spans)
    assert conv.roles.count(ROLE_ACTION) == n_action
    assert conv.turn_ids == sorted(conv.turn_ids)  # turns are contiguous and ordered


def test_rollout_keeps_sampled_ids_and_their_logprobs_match_a_forward_pass(tiny):
    policy, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    sampled = []
    real_generate = policy.generate

    def spy(prompts, **kw):
        ids, lps = real_generate(prompts, **kw)
        sampled.extend(ids)
        return ids, lps

    policy.generate = spy
    try:
        envs = make_envs(trainer_envs.ENV_ID, 6)
        eps = collect(policy, fmt, envs, list(range(6)), generator=torch.Generator().manual_seed(0), max_new_tokens=6)
    finally:
        del policy.generate
    spans = [ep.conversation.ids[s:e] for ep in eps for (s, e) in ep.conversation.action_spans]
    assert sorted(map(tuple, spans)) == sorted(map(tuple, sampled))
    batch = make_batch(eps, tokenizer.pad_token_id)
    with torch.no_grad():
        out = policy.evaluate(batch.ids, batch.attention_mask, batch.action_mask)
    diff = (out.logp - batch.sampled_logp)[batch.action_mask].abs().max()
    assert diff < 1e-4
    # value read positions are the last state token, just before each response
    for b, ep in enumerate(eps):
        for k, (s, _) in enumerate(ep.conversation.action_spans):
            assert batch.value_pos[b, k] == s - 1 and batch.roles[b, s - 1] == ROLE_TEMPLATE


def test_rollouts_are_identical_in_a_serial_pool_and_in_gymnasium_vector_envs(tiny):
    """The vector pool keeps the env-pool protocol: a sync and an async Gymnasium vector env of the same envs give the
    episodes of serial stepping."""
    from gymnasium.vector import AutoresetMode

    from agentgym_turn import make_vec
    from agentgym_turn.pools import VectorPool, make_guarded

    policy, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    factory = functools.partial(make_guarded, trainer_envs.ENV_ID)
    results = []
    for envs in (
        make_envs(trainer_envs.ENV_ID, 3, "list"),
        VectorPool(make_vec([factory] * 3, mode="sync")),
        VectorPool(make_vec([factory] * 3, mode="async", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})),
    ):
        try:
            eps = collect(policy, fmt, envs, [5, 6, 7, 8], generator=torch.Generator().manual_seed(1), max_new_tokens=5)
        finally:
            envs.close()
        results.append([(e.conversation.ids, e.rewards, e.terminated, e.truncated) for e in eps])
    assert results[0] == results[1] == results[2]


def test_context_overflow_ends_the_episode_as_truncated_never_cut(tiny):
    policy, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    envs = SerialPool([gym.make(trainer_envs.ENV_ID)])
    [long] = collect(
        ScriptedPolicy(fmt, ["L", "R"]),
        fmt,
        envs,
        [3],
        generator=torch.Generator(),
        max_new_tokens=4,
        max_context_tokens=10_000,
    )
    first = len(
        fmt.tokenizer.apply_chat_template(
            [{"role": "user", "content": long.conversation.observations[0]}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
    )
    limit = first + 4 + len(fmt.assistant_suffix) + 2  # room for one turn, not two
    [ep] = collect(
        ScriptedPolicy(fmt, ["L", "R"]),
        fmt,
        envs,
        [3],
        generator=torch.Generator(),
        max_new_tokens=4,
        max_context_tokens=limit,
    )
    if ep.terminated:  # the first door was already wrong: nothing to test for this seed
        pytest.skip("episode ended on the first turn")
    assert ep.truncated and ep.truncation == "context" and ep.num_turns == 1
    assert len(ep.conversation) <= limit
    with pytest.raises(ValueError, match="max_context_tokens"):
        collect(
            ScriptedPolicy(fmt, ["L"]),
            fmt,
            envs,
            [3],
            generator=torch.Generator(),
            max_new_tokens=4,
            max_context_tokens=first,
        )


def test_make_batch_puts_turn_rewards_on_the_last_action_token(tiny):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    envs = SerialPool([gym.make(trainer_envs.ENV_ID) for _ in range(3)])
    eps = collect(
        ScriptedPolicy(fmt, ["left", "xyz", "right"]),
        fmt,
        envs,
        [0, 1, 2],
        generator=torch.Generator(),
        max_new_tokens=8,
    )
    batch = make_batch(eps, tokenizer.pad_token_id)
    for b, ep in enumerate(eps):
        ends = [e - 1 for _, e in ep.conversation.action_spans]
        assert torch.allclose(batch.token_rewards[b, ends], torch.tensor(ep.rewards))
        assert batch.token_rewards[b].sum().item() == pytest.approx(ep.ret)
        assert batch.turn_mask[b].sum() == ep.num_turns and batch.turn_rewards[
            b, : ep.num_turns
        ].tolist() == pytest.approx(ep.rewards)
    assert (batch.turn_ids[batch.attention_mask == 0] == -1).all()
    assert not batch.action_mask[batch.attention_mask == 0].any()
