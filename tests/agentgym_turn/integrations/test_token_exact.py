"""Token-exact adapters: TRL's rollout_func and verl-agent's envs hand over the ids ChatView assembles, with its mask.

Every check replays the sampled ids through a fresh ChatView and compares token for token; the TRL one also runs a
real GRPOTrainer with the tiny offline model for two steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.chat import ChatView
from agentgym_turn.integrations.trl import completion_of, env_return_reward, seed_from_prompt, token_rollout
from agentgym_turn.integrations.verl_agent import build_envs
from support.paths import ROOT

ENV_ID = "TurnSokoban-v0"
ENV_KWARGS = {"prompt_style": "compact", "show_border": False}
MAX_TURNS = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("torch")
    from reference_trainer.policy import load_policy
    from reference_trainer.tiny import TinySpec, build_tiny

    path = build_tiny(
        ENV_ID, tmp_path_factory.mktemp("tiny") / "model", spec=TinySpec(corpus_episodes=8), env_kwargs=ENV_KWARGS
    )
    policy, tokenizer = load_policy(path)
    return policy.lm, tokenizer


def _replay(tokenizer, seed, responses, **view_kwargs):
    """A fresh ChatView fed the same sampled ids; returns it and the episode's return."""
    view = ChatView(gym.make(ENV_ID, **ENV_KWARGS), tokenizer=tokenizer, **view_kwargs)
    view.reset(seed=seed)
    total = 0.0
    for ids in responses:
        total += view.step(list(ids))[1]
    return view, total


def _runs(mask):
    """``(start, end)`` of each run of 1s."""
    runs, start = [], None
    for k, m in enumerate(list(mask) + [0]):
        if m and start is None:
            start = k
        elif not m and start is not None:
            runs.append((start, k))
            start = None
    return runs


def _full_logprobs(model, prompt, completion):
    """Each completion token's log-prob from one unpadded forward pass over the whole sequence."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0].float()
    logps = torch.log_softmax(logits, dim=-1)
    return [logps[len(prompt) + j - 1, token].item() for j, token in enumerate(completion)]


def test_token_rollout__ids_equal_a_chat_view_replay_and_env_mask_is_its_mask(tiny):
    import torch

    model, tokenizer = tiny
    torch.manual_seed(0)
    rollout = token_rollout(ENV_ID, max_turns=MAX_TURNS, max_new_tokens=12, **ENV_KWARGS)
    rollout.history = []
    prompts = ["0", "0", "7", "7"]  # TRL passes each row num_generations times in a row
    trainer = types.SimpleNamespace(processing_class=tokenizer, model=model, temperature=1.0)
    out = rollout(prompts, trainer)
    assert all(len(out[key]) == len(prompts) for key in out)
    assert out["env_seed"] == [0, 0, 7, 7] and len(rollout.history) == len(prompts)
    mismatches = 0
    for k, record in enumerate(rollout.history):
        view, episode_return = _replay(tokenizer, record.seed, record.response_ids)
        prompt, completion, mask = completion_of(view)
        mismatches += sum(a != b for a, b in zip(prompt + completion, out["prompt_ids"][k] + out["completion_ids"][k]))
        assert (prompt, completion) == (out["prompt_ids"][k], out["completion_ids"][k])
        assert len(prompt) + len(completion) == len(out["prompt_ids"][k]) + len(out["completion_ids"][k])
        assert mask == out["env_mask"][k]
        assert prompt == view.samples()[0].ids[: len(prompt)]
        # the sequence is the view's whole-episode sequence, cut after the last response
        sequence = view.samples()[0]
        assert prompt + completion == sequence.ids[: len(prompt) + len(completion)]
        assert mask == sequence.mask[len(prompt) : len(prompt) + len(completion)]
        # the 1-runs of the mask are the responses, exactly as sampled, and the completion ends with the last one
        runs = _runs(mask)
        assert [completion[s:e] for s, e in runs] == record.response_ids
        assert runs[-1][1] == len(completion) and len(record.response_ids) == out["env_turns"][k] <= MAX_TURNS
        # log-probs: the sampled ids' under one unpadded forward pass; 0.0 on env tokens
        logprobs = out["logprobs"][k]
        assert len(logprobs) == len(completion)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if not m)
        reference = _full_logprobs(model, prompt, completion)
        assert max(abs(a - b) for a, b, m in zip(reference, logprobs, mask) if m) < 1e-4
        assert out["env_return"][k] == pytest.approx(episode_return, abs=1e-9)
    assert mismatches == 0
    assert env_return_reward([None] * 4, out["env_return"], out["env_reward_valid"]) == out["env_return"]
    assert env_return_reward([None] * 2, [1.0, 2.0], [True, False]) == [1.0, None]


def test_token_rollout__sequences_stay_within_max_length(tiny):
    import torch

    model, tokenizer = tiny
    torch.manual_seed(1)
    view = ChatView(gym.make(ENV_ID, **ENV_KWARGS), tokenizer=tokenizer)
    view.reset(seed=3)
    limit = len(view.tokens().ids) + 40
    rollout = token_rollout(ENV_ID, max_turns=5, max_new_tokens=12, max_length=limit, **ENV_KWARGS)
    out = rollout(["3", "3"], types.SimpleNamespace(processing_class=tokenizer, model=model, temperature=1.0))
    for prompt, completion in zip(out["prompt_ids"], out["completion_ids"]):
        assert len(prompt) + len(completion) <= limit


def test_token_rollout__arguments_and_seeds():
    assert seed_from_prompt("12") == 12 and seed_from_prompt(5) == 5 and seed_from_prompt("") is None
    assert seed_from_prompt([{"role": "user", "content": " 9 "}]) == 9
    with pytest.raises(ValueError, match="seed_of"):
        seed_from_prompt("push the box")
    with pytest.raises(ValueError, match="history_window"):
        token_rollout(ENV_ID, history_window=2)
    with pytest.raises(ValueError, match="max_turns"):
        token_rollout(ENV_ID, max_turns=0)
    with pytest.raises(ValueError, match="registered"):
        token_rollout("NoSuchEnv-v0")


def test_trl_module_imports_without_torch():
    code = "import sys, agentgym_turn.integrations.trl, agentgym_turn.integrations.verl_agent; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_verl_agent_envs__step_ids_and_trajectory_are_the_views_exact_tokens(tiny):
    import torch

    from agentgym_turn.integrations.trl import sample_batch

    model, tokenizer = tiny
    torch.manual_seed(2)
    envs = build_envs(ENV_ID, seed=0, env_num=2, group_n=2, env_kwargs=ENV_KWARGS, tokenizer=tokenizer)
    plain = build_envs(ENV_ID, seed=0, env_num=2, group_n=2, env_kwargs=ENV_KWARGS)  # the text API, as before
    observations, _ = envs.reset()
    assert observations == plain.reset()[0]
    prompts = [envs.tokens(i).ids for i in range(4)]
    stop_ids = envs.views[0].format.stop_ids
    sampled = [[] for _ in range(4)]
    dones = [False] * 4
    for _ in range(MAX_TURNS):
        inputs = [envs.tokens(i).ids for i in range(4)]
        responses = [ids for ids, _ in sample_batch(model, inputs, [12] * 4, stop_ids, vocab_size=len(tokenizer))]
        texts = [envs.views[i].format.decode_response(ids) for i, ids in enumerate(responses)]
        for i, ids in enumerate(responses):
            if not dones[i]:
                sampled[i].append(ids)
        observations, rewards, dones, infos = envs.step_ids(responses)
        assert (observations, rewards, dones) == plain.step(texts)[:3]  # the env saw the decoded text
        if all(dones):
            break
    for i in range(4):
        trajectory = envs.trajectory(i)
        assert trajectory["prompt_ids"] == prompts[i]
        view, _ = _replay(tokenizer, envs.seeds[i], sampled[i])
        prompt, response, mask = completion_of(view)
        assert (trajectory["prompt_ids"], trajectory["response_ids"], trajectory["response_mask"]) == (
            prompt,
            response,
            mask,
        )
        assert [response[s:e] for s, e in _runs(mask)] == sampled[i]
        sequence = envs.samples(i)[0]
        assert prompt + response == sequence.ids[: len(prompt) + len(response)]
    with pytest.raises(ValueError, match="tokenizer"):
        plain.tokens(0)
    envs.close()
    plain.close()


def test_token_rollout__drives_a_real_grpo_trainer(tiny, tmp_path):
    pytest.importorskip("trl")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny
    steps, generations, rows_per_step = 2, 2, 2
    rollout = token_rollout(ENV_ID, max_turns=MAX_TURNS, max_new_tokens=12, **ENV_KWARGS)
    rollout.history = []
    dataset = Dataset.from_dict({"prompt": [str(seed) for seed in range(steps * rows_per_step)]})
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=steps,
        per_device_train_batch_size=generations * rows_per_step,
        num_generations=generations,
        max_completion_length=256,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        shuffle_dataset=False,
        dataloader_num_workers=0,
        gradient_checkpointing=False,
    )
    torch.manual_seed(0)
    trainer = GRPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        reward_funcs=[env_return_reward],
        rollout_func=rollout,
    )
    trainer.train()
    per_step = generations * rows_per_step
    episodes = rollout.history
    assert len(episodes) == steps * per_step
    seeds = [e.seed for e in episodes]
    assert all(
        len(set(seeds[s : s + generations])) == 1 for s in range(0, len(seeds), generations)
    )  # groups share a task
    logs = [entry for entry in trainer.state.log_history if "rewards/env_return_reward/mean" in entry]
    assert len(logs) == steps
    for k, entry in enumerate(logs):
        batch = episodes[k * per_step : (k + 1) * per_step]
        returns = [_replay(tokenizer, e.seed, e.response_ids)[1] for e in batch]
        assert entry["rewards/env_return_reward/mean"] == pytest.approx(sum(returns) / len(returns), abs=1e-5)
        # TRL counts the completion length on env_mask: the sampled ids only
        sampled = [sum(len(ids) for ids in e.response_ids) for e in batch]
        assert entry["completions/mean_length"] == pytest.approx(sum(sampled) / len(sampled), abs=1e-4)
    losses = [entry for entry in trainer.state.log_history if "grad_norm" in entry]
    assert len(losses) == steps and all(torch.isfinite(torch.tensor(float(entry["loss"]))) for entry in losses)
