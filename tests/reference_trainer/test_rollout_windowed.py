"""Training on the histories a model is shown: a window of the last ``k`` turns or the compact state alone.

Under a history policy each response is sampled from a window of the episode, so the trainer trains it in that same
sequence: one batch row per sequence (:func:`reference_trainer.rollout.make_batch`), turn GAE over the episode's turns
across its rows (``tests/reference_trainer/test_advantages.py`` checks the estimator by hand)."""

import gymnasium as gym
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import trainer_envs
from agentgym_turn.pools import SerialPool
from agentgym_turn.tokens import ChatFormat
from reference_trainer.config import history_policy
from reference_trainer.policy import load_policy
from reference_trainer.rollout import collect, expert_episodes, make_batch
from reference_trainer.trainer import Trainer

HISTORIES = [None, 1, 2, 3, "compact"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_policy(tiny_dir)


class Recording:
    """A policy that remembers every prompt it was given, by episode (``keys``) and turn."""

    def __init__(self, policy):
        self.policy, self.prompts = policy, {}

    def generate(self, prompts, *, keys, turn_cache=None, **kw):
        for key, prompt in zip(keys, prompts):
            self.prompts.setdefault(key, []).append(list(prompt))
        return self.policy.generate(prompts, keys=keys, turn_cache=turn_cache, **kw)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.sampled_from(HISTORIES), seed=st.integers(0, 10_000), temperature=st.sampled_from([0.0, 1.0]))
def test_each_response_is_trained_once_in_the_sequence_it_was_sampled_in(tiny, history, seed, temperature):
    policy, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    recording = Recording(policy)
    seeds = [seed + i for i in range(6)]
    envs = SerialPool([gym.make(trainer_envs.ENV_ID) for _ in seeds])
    episodes = collect(
        recording,
        fmt,
        envs,
        seeds,
        generator=torch.Generator().manual_seed(seed),
        max_new_tokens=3,
        temperature=temperature,
        history=history,
    )
    envs.close()
    batch = make_batch(episodes, 0)
    rows = batch.episode_index.tolist()
    assert rows == sorted(rows) and set(rows) == set(range(len(episodes)))
    for e, ep in enumerate(episodes):
        mine = [b for b, x in enumerate(rows) if x == e]
        if history is None:
            assert len(mine) == 1
        trained_turns = []
        for b in mine:
            turns = batch.turn_mask[b].nonzero().flatten().tolist()
            trained_turns += turns
            for k in turns:
                start, end = ep.conversation.action_spans[k]
                pos = int(batch.value_pos[b, k])
                # the row holds, before turn k's response, exactly the prompt the policy sampled it from
                assert batch.ids[b, : pos + 1].tolist() == recording.prompts[e][k]
                response = ep.conversation.ids[start:end]
                assert batch.ids[b, pos + 1 : pos + 1 + len(response)].tolist() == response
                assert batch.action_mask[b, pos + 1 : pos + 1 + len(response)].all()
                assert float(batch.turn_rewards[b, k]) == pytest.approx(ep.rewards[k])
            assert int(batch.action_mask[b].sum()) == sum(
                ep.conversation.action_spans[k][1] - ep.conversation.action_spans[k][0] for k in turns
            )
        assert sorted(trained_turns) == list(range(ep.num_turns))  # every turn in exactly one row
        logp = torch.cat([batch.sampled_logp[b][batch.action_mask[b]] for b in mine]).tolist()
        assert logp == pytest.approx(ep.sampled_logp)
        assert int(batch.ends_episode[mine].sum()) == 1 and bool(batch.ends_episode[mine[-1]] or ep.truncated)
        if ep.bootstrap_pos is not None:
            assert int((batch.bootstrap_pos[mine] >= 0).sum()) == 1


def test_history_window_accepts_k_none_and_compact_and_refuses_the_rest():
    assert [history_policy(v) for v in (None, "none", 3, "3", "compact")] == [None, None, 3, 3, "compact"]
    for bad in ("0", -1, "two", 2.5, True):
        with pytest.raises(ValueError, match="history_window"):
            history_policy(bad)


@pytest.mark.parametrize("algo", ["turn-ppo", "st-ppo", "grpo"])
@pytest.mark.parametrize("history", ["1", "compact"])
def test_a_windowed_run_trains_rows_per_sequence_and_reports_its_tokens(tiny_dir, tmp_path, algo, history):
    trainer = Trainer(
        trainer_envs.toy_config(tiny_dir, tmp_path, algo, history_window=history, sft_episodes=8, sft_steps=2)
    )
    try:
        trainer.sft()
        metrics = [trainer.train_iteration() for _ in range(2)]
        end = trainer.evaluate()
    finally:
        trainer.close()
    for m in metrics:
        assert m["rollout/train_rows"] >= m["rollout/episodes"]  # at least one row per episode
        assert m["rollout/train_tokens"] > 0 and all(v == v for k, v in m.items() if k.startswith("train/"))
    assert 0.0 <= end["success"] <= 1.0


def test_token_gae_with_a_window_says_which_presets_to_use(tiny_dir, tmp_path):
    with pytest.raises(ValueError, match="turn-level preset"):
        Trainer(trainer_envs.toy_config(tiny_dir, tmp_path, "ppo", history_window="2"))


def test_sft_demos_under_compact_are_one_row_per_turn(tiny):
    _, tokenizer = tiny
    fmt = ChatFormat(tokenizer)
    demos = expert_episodes(trainer_envs.ENV_ID, fmt, [0, 1, 2], history="compact")
    batch = make_batch(demos, 0)
    assert len(batch) == sum(d.num_turns for d in demos)
    assert (batch.turn_mask.sum(1) == 1).all()  # each row trains the one response sampled from its state
