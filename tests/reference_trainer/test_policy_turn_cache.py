"""The rollout's turn cache (``policy.TurnCache``): keys and values kept from one turn to the next give
the tokens and log-probs that running every whole conversation through the model again gives."""

import gymnasium as gym
import pytest
import torch

from support import trainer_envs
from reference_trainer.policy import Policy, TurnCache, load_policy
from reference_trainer.recipes.sokoban import SOKOBAN_ENV_KWARGS
from agentgym_turn.pools import SerialPool
from reference_trainer.rollout import collect
from reference_trainer.tiny import TinySpec, build_tiny
from agentgym_turn.tokens import ChatFormat
from support.random_models import random_lm

STOPS = frozenset({3})


def _turns(policy, prompts_by_turn, reuse, temperature, seed=7):
    """Play scripted turns: each turn's prompts extend the last turn's prompt and sampled response by fresh
    observation tokens; rows leave between turns. Returns every turn's (ids, log-probs)."""
    gen = torch.Generator().manual_seed(seed)
    cache = TurnCache() if reuse else None
    history: dict[int, list[int]] = {}
    out = []
    for turn in prompts_by_turn:
        keys = sorted(turn)
        prompts = [history.get(k, []) + turn[k] for k in keys]
        kw = dict(turn_cache=cache, keys=keys) if reuse else {}
        ids, lps = policy.generate(
            prompts, max_new_tokens=6, stop_ids=STOPS, pad_id=0, generator=gen, temperature=temperature, **kw
        )
        for k, p, r in zip(keys, prompts, ids):
            history[k] = p + r + [4]  # an end-of-turn token the template adds after a response
            if reuse:  # the next turn reuses all of the prompt and the response's fed tokens
                assert len(p) <= cache.cached_prefix(k, history[k] + [1]) <= len(p) + len(r)
        out.append((ids, lps))
    return out


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_reused_keys_and_values_sample_what_recomputing_every_conversation_samples(arch, temperature):
    policy = Policy(random_lm(arch, seed=5), vocab_limit=290)
    turns = [
        {0: [5, 6, 7, 8, 9], 1: [10, 11], 2: [12, 13, 14, 15, 16, 17, 18], 3: [19]},
        {0: [20, 21], 1: [22, 23, 24, 25, 26, 27, 28, 29], 2: [30], 3: [31, 32, 33]},
        {0: [34, 35, 36], 2: [37, 38, 39, 40]},  # rows 1 and 3 have ended
        {2: [41]},
    ]
    reused = _turns(policy, turns, True, temperature)
    plain = _turns(policy, turns, False, temperature)
    for (ids_a, lp_a), (ids_b, lp_b) in zip(reused, plain):
        assert ids_a == ids_b
        for a, b in zip(lp_a, lp_b):
            assert a == pytest.approx(b, abs=1e-4)
    assert sum(len(r) for ids, _ in reused for r in ids) > 20  # it sampled, not one stop token per row


def test_a_prompt_that_does_not_extend_what_the_cache_holds_runs_whole():
    cache = TurnCache()
    cache.tokens = {0: [1, 2, 3], 1: [4, 5]}
    assert cache.cached_prefix(0, [1, 2, 3, 9]) == 3
    assert cache.cached_prefix(0, [1, 2, 7, 9]) == 0  # the held tokens are not its beginning
    assert cache.cached_prefix(0, [1, 2, 3]) == 0  # nothing new to run: the whole prompt runs again
    assert cache.cached_prefix(1, [4]) == 0 and cache.cached_prefix(2, [4, 5, 6]) == 0
    policy = Policy(random_lm("qwen2", seed=2), vocab_limit=290)
    with pytest.raises(ValueError, match="one key per prompt"):
        policy.generate(
            [[5, 6]], max_new_tokens=2, stop_ids=STOPS, pad_id=0, generator=torch.Generator(), turn_cache=cache
        )


@pytest.fixture(scope="module")
def toy_policy(tmp_path_factory):
    return load_policy(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.mark.parametrize("env_id", [trainer_envs.ENV_ID, trainer_envs.GUESS_ID])
def test_rollouts_with_the_turn_cache_equal_rollouts_without(toy_policy, env_id):
    policy, tokenizer = toy_policy
    fmt = ChatFormat(tokenizer)
    envs = SerialPool([gym.make(env_id) for _ in range(6)])
    runs = [
        collect(
            policy,
            fmt,
            envs,
            list(range(12)),
            generator=torch.Generator().manual_seed(3),
            max_new_tokens=8,
            temperature=1.0,
            reuse_cache=reuse,
        )
        for reuse in (True, False)
    ]
    envs.close()
    for a, b in zip(*runs):
        assert a.conversation.ids == b.conversation.ids and a.rewards == b.rewards
        assert a.sampled_logp == pytest.approx(b.sampled_logp, abs=1e-4)
    assert max(e.num_turns for e in runs[0]) > 1


@pytest.fixture(scope="module")
def sokoban_policy(tmp_path_factory):
    spec = TinySpec(arch="gpt2", num_layers=3, corpus_episodes=16)  # the Sokoban recipe's layout
    return load_policy(
        build_tiny(
            "TurnSokoban-v0", tmp_path_factory.mktemp("tiny") / "sokoban", spec=spec, env_kwargs=SOKOBAN_ENV_KWARGS
        )
    )


def test_a_five_turn_sokoban_rollout_with_the_turn_cache_equals_one_without(sokoban_policy):
    policy, tokenizer = sokoban_policy
    fmt = ChatFormat(tokenizer)
    envs = SerialPool([gym.make("TurnSokoban-v0", max_episode_steps=5, **SOKOBAN_ENV_KWARGS) for _ in range(6)])
    runs = [
        collect(
            policy,
            fmt,
            envs,
            list(range(6)),
            generator=torch.Generator().manual_seed(11),
            max_new_tokens=16,
            max_context_tokens=1024,
            temperature=1.0,
            reuse_cache=reuse,
        )
        for reuse in (True, False)
    ]
    envs.close()
    for a, b in zip(*runs):
        assert a.conversation.ids == b.conversation.ids and a.rewards == b.rewards
        assert a.sampled_logp == pytest.approx(b.sampled_logp, abs=1e-4)
        assert a.truncation != "context"
    assert max(e.num_turns for e in runs[0]) == 5
