"""The training loop: gradient masking, degenerate batches, micro-batching, exact resume,
loading a user's checkpoint, the command line."""

import math
import os
import subprocess
import sys

import gymnasium as gym
import pytest
import torch

from support.paths import ROOT, TESTS
from support import trainer_envs
from support.scripted import Scripted
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_trainer.cli import build_parser, config_from_args
from reference_trainer.config import Config, preset
from reference_trainer.metrics import read_metrics
from agentgym_turn.pools import SerialPool
from reference_trainer.rollout import collect, make_batch
from reference_trainer.trainer import Trainer, micro_batches

PRESETS = ["ppo", "turn-ppo", "s-ppo", "st-ppo", "grpo"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


def _config(tiny_dir, out, algo="turn-ppo", **algo_kw):
    return trainer_envs.toy_config(tiny_dir, out, algo, **{"epochs": 2, **algo_kw})


def _scripted_batch(trainer, texts, seeds, env_id=trainer_envs.ENV_ID):
    envs = SerialPool([gym.make(env_id) for _ in seeds])
    eps = collect(
        Scripted(trainer.fmt, texts),
        trainer.fmt,
        envs,
        seeds,
        generator=torch.Generator(),
        max_new_tokens=4,
        groups=[i // 2 for i in range(len(seeds))],
    )
    return make_batch(eps, trainer.pad_id)


# ---------------------------------------------------------------------- gradient inspection
@pytest.mark.parametrize("algo", PRESETS)
def test_gradients_never_reach_observation_template_or_padding_positions(tiny_dir, tmp_path, algo):
    tr = Trainer(_config(tiny_dir, tmp_path, algo, kl_coef=0.1, ent_coef=0.01))
    batch = _scripted_batch(tr, ["L", "xyz", "R", "left"], [0, 1, 2, 3])  # ragged: padding in every row but one
    prepared = tr.prepare(batch)
    seen = {}
    real_eval = tr.policy.evaluate

    def evaluate_everywhere(ids, attention_mask, positions, **kw):
        # log-probs and entropies at *every* real position, so a leak would show up as a gradient
        everywhere = attention_mask.bool().clone()
        everywhere[:, 0] = False
        out = real_eval(ids, attention_mask, everywhere, **kw)
        for name in ("logp", "entropy", "values"):
            t = getattr(out, name)
            if t is not None and t.requires_grad:
                t.retain_grad()
                seen[name] = t
        return out

    tr.policy.evaluate = evaluate_everywhere
    hidden = {}
    trunk = tr.policy.lm.get_decoder()
    handle = trunk.register_forward_hook(lambda m, i, o: hidden.setdefault("h", o.last_hidden_state).retain_grad())
    try:
        sel = torch.arange(len(batch))
        loss, _ = tr._losses(
            prepared.select(sel),
            batch.action_mask.sum().float(),
            prepared.value_mask.sum().float().clamp(min=1),
            None,
            tr.policy.actor_parameters(),
        )
        loss.backward()
    finally:
        del tr.policy.evaluate
        handle.remove()
    act = batch.action_mask
    assert seen["logp"].grad[~act].abs().max() == 0 and seen["logp"].grad[act].abs().sum() > 0
    assert seen["entropy"].grad[~act].abs().max() == 0
    if "values" in seen:
        vmask = prepared.value_mask
        assert seen["values"].grad[~vmask].abs().max() == 0 and seen["values"].grad[vmask].abs().sum() > 0
    pad = batch.attention_mask == 0
    assert pad.any() and hidden["h"].grad[pad].abs().max() == 0
    tr.close()


# ---------------------------------------------------------------------- degenerate batches
DEGENERATE = {
    "all rewards equal": (["xyz"], [0, 1, 2, 3]),  # every turn invalid: same reward, truncated by the turn limit
    "empty responses": ([""], [4, 5, 6, 7]),  # only the end-of-turn token
    "mixed": (["", "L", "R"], [8, 9, 10, 11]),
}


@pytest.mark.parametrize("algo", PRESETS)
@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_no_nan_on_degenerate_batches(tiny_dir, tmp_path, algo, case):
    tr = Trainer(_config(tiny_dir, tmp_path, algo, kl_coef=0.05, epochs=3, lr=0.05))
    texts, seeds = DEGENERATE[case]
    batch = _scripted_batch(tr, texts, seeds)
    if case != "mixed":
        assert batch.truncated.all() or batch.scores.unique().numel() == 1
    metrics = tr.update(tr.prepare(batch))
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert all(torch.isfinite(p).all() for p in tr.policy.parameters())
    tr.close()


# ---------------------------------------------------------------------- micro-batches
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 500), max_size=40),
    st.one_of(st.none(), st.integers(1, 12)),
    st.sampled_from([0, 1, 64, 600, 2048]),
)
def test_micro_batches_cover_every_row_once_within_the_budget(lengths, size, budget):
    chunks = micro_batches(torch.tensor(lengths, dtype=torch.long), size, budget)
    rows = sorted(int(i) for c in chunks for i in c)
    assert rows == list(range(len(lengths)))
    for c in chunks:
        assert len(c) >= 1 and (size is None or len(c) <= size)
        if budget and len(c) > 1:  # a row longer than the budget may sit alone
            assert len(c) * max(lengths[int(i)] for i in c) <= budget
    if not budget:  # plain consecutive chunks
        step = size or max(len(lengths), 1)
        assert [c.tolist() for c in chunks] == [
            list(range(j, min(j + step, len(lengths)))) for j in range(0, len(lengths), step)
        ]


def test_micro_batches_by_tokens_group_similar_lengths():
    chunks = micro_batches(torch.tensor([10, 100, 12, 95, 11, 98]), None, 300)
    assert sorted(map(sorted, (c.tolist() for c in chunks))) == [[0, 2, 4], [1, 3, 5]]


@pytest.mark.parametrize(
    "algo,micro",
    [
        ("s-ppo", dict(micro_batch_size=2)),
        ("st-ppo", dict(micro_batch_size=2)),
        ("st-ppo", dict(micro_batch_tokens=40)),
    ],
)
def test_micro_batches_give_the_same_update_as_whole_minibatches(tiny_dir, tmp_path, algo, micro):
    results = []
    for i, kw in enumerate(({}, micro)):
        tr = Trainer(_config(tiny_dir, tmp_path / str(i), algo, **kw, lr=0.02, epochs=3))
        # SGD: Adam would blow float noise in near-zero gradient entries up to +-lr
        tr.optimizer = torch.optim.SGD([{"params": g["params"]} for g in tr.optimizer.param_groups], lr=0.5)
        tr.scheduler = torch.optim.lr_scheduler.LambdaLR(tr.optimizer, lambda step: 1.0)  # bound to the new optimizer
        batch = _scripted_batch(tr, ["L", "R", "abc", "left or right"], [0, 1, 2, 3, 4, 5, 6, 7])
        if kw.get("micro_batch_tokens"):  # the budget really splits minibatches of 4
            assert len(micro_batches(batch.attention_mask.sum(1), 4, kw["micro_batch_tokens"])) >= 4
        m = tr.update(tr.prepare(batch))
        results.append((m, [p.detach().clone() for p in tr.policy.parameters()]))
        tr.close()
    (m1, p1), (m2, p2) = results
    assert m1["clipfrac"] > 0 and m1["clip_bias_norm"] > 0  # the correction was exercised
    assert m2["clip_bias_norm"] == pytest.approx(m1["clip_bias_norm"], rel=1e-4)
    for a, b in zip(p1, p2):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------- resume
def _strip_time(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def test_resume_from_a_checkpoint_continues_with_identical_metrics(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, tmp_path / "straight", "st-ppo", kl_coef=0.05, ema_decay=0.5)
    cfg.train.iterations = 4
    straight = Trainer(cfg)
    for _ in range(2):
        straight.logger.log({"iteration": straight.iteration + 1, **straight.train_iteration()})
    ckpt = straight.save_checkpoint(tmp_path / "ckpt")
    straight.evaluate()  # evaluation must not disturb the training RNG streams
    for _ in range(2):
        straight.logger.log({"iteration": straight.iteration + 1, **straight.train_iteration()})
    straight.close()
    expected = _strip_time(read_metrics(tmp_path / "straight" / "metrics.jsonl"))[2:]

    # resume in a fresh process, through the command line
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "resumed"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_trainer",
            "train",
            "--resume",
            str(ckpt),
            "--out",
            str(out),
            "--import",
            "support.trainer_envs",
            "--no-progress",
        ],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
    )
    resumed = [r for r in _strip_time(read_metrics(out / "metrics.jsonl")) if r.get("phase") == "train"]
    for r in resumed:
        r.pop("phase")
    assert len(resumed) == 2 and resumed == expected
    # the weight average resumes too: the resumed run's saved average is the straight run's
    saved = Trainer(_config(str(out / "averaged_policy"), tmp_path / "check", "st-ppo")).policy.lm.parameters()
    for avg, q in zip(straight.averaged_lm.parameters(), saved):
        assert torch.allclose(avg, q, atol=1e-6)


# ---------------------------------------------------------------------- models
def test_a_users_local_checkpoint_loads_and_trains_with_a_separate_critic(tiny_dir, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from reference_trainer.policy import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=512,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
    )
    user = tmp_path / "my-llama"
    model.save_pretrained(user)
    tok.save_pretrained(user)
    cfg = _config(str(user), tmp_path / "run", "turn-ppo")
    cfg.model.critic = "separate"
    tr = Trainer(cfg)
    assert type(tr.policy.lm).__name__ == "LlamaForCausalLM" and tr.policy.critic_trunk is not None
    m = tr.train_iteration()
    assert math.isfinite(m["train/vf_loss"]) and m["rollout/episodes"] == 8
    path = tr.save_checkpoint(tmp_path / "ckpt")
    tr.close()
    cfg2 = _config(str(path / "policy"), tmp_path / "run2", "turn-ppo")
    tr2 = Trainer(cfg2)
    assert tr2.policy.critic_trunk is not None  # restored from the saved policy directory
    for a, b in zip(tr.policy.parameters(), tr2.policy.parameters()):
        assert torch.equal(a, b)
    tr2.close()


def test_sft_called_again_continues_it_with_the_same_demos_optimizer_and_batch_draws(tiny_dir, tmp_path):
    def actor_after(*chunks):
        cfg = _config(tiny_dir, tmp_path / f"sft{len(chunks)}", "turn-ppo")
        cfg.train.sft_episodes, cfg.train.sft_batch_size = 8, 4
        tr = Trainer(cfg)
        try:
            for steps in chunks:
                tr.sft(steps=steps)
            return {k: v.detach().clone() for k, v in tr.policy.actor_trunk.state_dict().items()}
        finally:
            tr.close()

    whole, halves = actor_after(4), actor_after(2, 2)
    assert all(torch.allclose(whole[k], halves[k], rtol=1e-5, atol=1e-6) for k in whole)
    assert any(not torch.allclose(whole[k], v) for k, v in actor_after(2).items())  # the second call moved it on


def test_sft_restarts_a_separate_critic_from_the_sft_weights(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, tmp_path, "turn-ppo")
    cfg.model.critic = "separate"
    cfg.train.sft_episodes, cfg.train.sft_steps, cfg.train.sft_batch_size = 8, 3, 4
    tr = Trainer(cfg)
    before = [p.detach().clone() for p in tr.policy.critic_trunk.parameters()]
    tr.sft()
    actor = tr.policy.actor_trunk.state_dict()
    for name, value in tr.policy.critic_trunk.state_dict().items():
        assert torch.equal(value, actor[name]) and value.data_ptr() != actor[name].data_ptr()  # equal, not shared
    assert any(not torch.equal(a, b) for a, b in zip(before, tr.policy.critic_trunk.parameters()))
    tr.close()

    cfg.model.critic_model, cfg.train.out = tiny_dir, str(tmp_path / "own-critic")  # a critic the user chose stays
    tr = Trainer(cfg)
    before = [p.detach().clone() for p in tr.policy.critic_trunk.parameters()]
    tr.sft()
    assert all(torch.equal(a, b) for a, b in zip(before, tr.policy.critic_trunk.parameters()))
    tr.close()


def test_rl_anchors_start_from_the_sft_policy(tiny_dir, tmp_path):
    """The KL reference and the weight average are the policy at the start of RL, i.e. after SFT."""
    cfg = _config(tiny_dir, tmp_path, "turn-ppo", kl_coef=0.1, ema_decay=0.9)
    cfg.train.sft_episodes, cfg.train.sft_steps, cfg.train.sft_batch_size = 8, 3, 4
    tr = Trainer(cfg)
    before = [p.detach().clone() for p in tr.policy.lm.parameters()]
    tr.sft()
    now = list(tr.policy.lm.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, now))
    assert all(torch.equal(a, b) for a, b in zip(tr.ref_lm.parameters(), now))
    assert all(torch.equal(a, b) for a, b in zip(tr.averaged_lm.parameters(), now))
    tr.close()


def test_evaluation_plays_the_weight_average_and_restores_the_actor(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, tmp_path, "turn-ppo", ema_decay=0.5, lr=0.05)
    tr = Trainer(cfg)
    start = [p.detach().clone() for p in tr.policy.lm.parameters()]
    tr.train_iteration()
    trained = [p.detach().clone() for p in tr.policy.lm.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(start, trained))
    for avg, s, t in zip(tr.averaged_lm.parameters(), start, trained):
        assert torch.allclose(avg, 0.5 * s + 0.5 * t)
    seen = []
    orig = tr.rollout
    tr.rollout = lambda *a, **k: (seen.append([p.detach().clone() for p in tr.policy.lm.parameters()]), orig(*a, **k))[
        1
    ]
    tr.evaluate()
    assert all(torch.allclose(a, b) for a, b in zip(seen[0], tr.averaged_lm.parameters()))  # the average played
    assert all(torch.equal(a, b) for a, b in zip(tr.policy.lm.parameters(), trained))  # and the actor is back
    tr.close()


def test_kl_reference_average_follows_the_weight_average(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path, "turn-ppo", kl_coef=0.1, ema_decay=0.5, kl_reference="average", lr=0.05))
    for _ in range(2):
        tr.train_iteration()
        assert all(torch.equal(r, avg) for r, avg in zip(tr.ref_lm.parameters(), tr.averaged_lm.parameters()))
    assert any(not torch.equal(r, q) for r, q in zip(tr.ref_lm.parameters(), tr.policy.lm.parameters()))
    tr.close()
    with pytest.raises(ValueError, match="--ema-decay"):
        Trainer(_config(tiny_dir, tmp_path / "no-average", "turn-ppo", kl_coef=0.1, kl_reference="average"))


def test_old_logp_from_the_rollout_matches_a_recomputed_forward(tiny_dir, tmp_path):
    """``recompute_old_logp=False`` uses the log-probs recorded while sampling: the same numbers."""
    tr = Trainer(_config(tiny_dir, tmp_path, "turn-ppo", recompute_old_logp=False))
    batch = make_batch(tr.rollout(list(range(8))), tr.pad_id)
    prepared = tr.prepare(batch)
    assert torch.equal(prepared.old_logp, batch.sampled_logp * batch.action_mask)
    recomputed, _ = tr._forward(batch, with_values=False)
    assert torch.allclose(prepared.old_logp, recomputed, atol=1e-4)
    values_only, values = tr._forward(batch, with_logp=False)
    assert not values_only.any() and torch.equal(values, prepared.old_values)
    tr.close()


def test_missing_model_directory_says_what_to_do(tmp_path):
    cfg = _config(str(tmp_path / "nowhere"), tmp_path, "ppo")
    with pytest.raises(FileNotFoundError, match="--model tiny"):
        Trainer(cfg)


# ---------------------------------------------------------------------- command line
def test_the_documented_recipe_command_is_the_recipe():
    """docs/trainer.md's by-hand command configures exactly what reference_trainer.recipes does."""
    import shlex

    from reference_trainer.recipes import sokoban_tiny

    text = (ROOT / "docs" / "trainer.md").read_text()
    start = text.index("python -m reference_trainer train --env TurnSokoban-v0 --env-kwarg prompt_style=compact")
    argv = shlex.split(text[start : text.index("\n\n", start)].replace("\\\n", " "))[3:]
    cfg = config_from_args(build_parser().parse_args(argv))
    assert cfg.to_dict() == sokoban_tiny(out="runs/sokoban").to_dict()


def test_cli_help_lists_every_option_group():
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    for flag in (
        "--algo",
        "--model",
        "--device",
        "--dtype",
        "--sft-episodes",
        "--clip-bias-correction",
        "--resume",
        "--env-kwarg",
    ):
        assert flag in text


def test_cli_presets_and_explicit_overrides():
    p = build_parser()
    cfg = config_from_args(
        p.parse_args(["train", "--algo", "st-ppo", "--gamma", "0.5", "--env-kwarg", "prompt_style=compact"])
    )
    assert (cfg.algo.ratio_level, cfg.algo.advantage, cfg.algo.clip_bias_correction) == ("turn", "turn_gae", "max1")
    assert cfg.algo.gamma == 0.5 and cfg.algo.lam == 0.9 and cfg.rollout.env_kwargs == {"prompt_style": "compact"}
    cfg = config_from_args(p.parse_args(["train", "--algo", "grpo"]))
    assert cfg.rollout.group_size == 8 and cfg.algo.advantage == "grpo"
    cfg = config_from_args(p.parse_args(["train", "--algo", "ppo", "--value-clip", "none"]))
    assert cfg.algo.value_clip is None and (cfg.algo.gamma, cfg.algo.lam) == (1.0, 1.0)
    with pytest.raises(SystemExit, match="group-size"):
        config_from_args(p.parse_args(["train", "--algo", "grpo", "--group-size", "1"]))


# Runs the command line with the named modules made unimportable (as on a machine without the `train` extra).
_WITHOUT = """
import runpy, sys
blocked = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
sys.argv = ["python -m reference_trainer", *sys.argv[2:]]
runpy.run_module("reference_trainer", run_name="__main__")
"""


@pytest.mark.parametrize(
    "blocked,argv",
    [
        ("torch", ["demo"]),
        ("torch", ["train", "--iterations", "1"]),
        ("transformers", ["eval", "--model", "x"]),
        ("matplotlib", ["plot", "m.jsonl", "c.png"]),
    ],
)
def test_cli_without_the_train_extra_says_what_to_install(blocked, argv, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(
        [sys.executable, "-c", _WITHOUT, blocked, *argv], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"{blocked!r} cannot be imported" in p.stderr
    assert 'pip install "agentgym-turn[train]"' in p.stderr and "pip install torch==2.13.0" in p.stderr
    assert f"reference_trainer {argv[0]} needs" in p.stderr


@pytest.mark.parametrize("algo", PRESETS)
def test_a_preset_is_the_same_config_from_python_and_from_the_command_line(algo):
    p = build_parser()
    assert preset(algo) == Config.from_preset(algo) == config_from_args(p.parse_args(["train", "--algo", algo]))
    argv = [
        "train",
        "--algo",
        algo,
        "--gamma",
        "0.5",
        "--group-size",
        "3",
        "--env",
        "E-v0",
        "--tiny-hidden",
        "32",
        "--env-kwarg",
        "prompt_style=compact",
    ]
    assert preset(
        algo, gamma=0.5, group_size=3, env="E-v0", tiny_hidden=32, env_kwargs={"prompt_style": "compact"}
    ) == config_from_args(p.parse_args(argv))
    if algo == "grpo":  # the rollout settings a preset implies come with it from Python too
        assert (preset(algo).rollout.group_size, preset(algo).rollout.tasks_per_iteration) == (8, 8)
    with pytest.raises(TypeError, match="unknown field.*'gama'"):
        preset(algo, gama=0.5)


def test_cli_unknown_env_says_how_to_register_one(tiny_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_trainer",
            "eval",
            "--env",
            "NoSuchEnv-v0",
            "--model",
            tiny_dir,
            "--out",
            str(tmp_path),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and "--import" in p.stderr


# ---------------------------------------------------------------------- learning
@pytest.mark.slow
@pytest.mark.background(trainer_envs.corridor_from_random_start, minutes=0.5)
@pytest.mark.parametrize("algo", PRESETS)
def test_every_preset_learns_the_toy_corridor_from_a_random_start(background_result, algo):
    # the run (support/trainer_envs.py) goes on beside the learning jobs; here, what it reached
    summary = background_result
    assert summary["start"]["success"] < 0.5
    assert summary["end"]["success"] > 0.9, (algo, summary["end"], summary["iterations"])


def test_sft_leaves_out_expert_episodes_longer_than_the_context_and_says_what_to_change_when_none_fit():
    from reference_trainer.rollout import Episode
    from agentgym_turn.tokens import Conversation
    from reference_trainer.trainer import fitting_demos

    def demo(n):
        ep = Episode(Conversation(), 0, 0)
        ep.conversation.ids.extend([1] * n)
        return ep

    keep, dropped = fitting_demos([demo(10), demo(50), demo(20)], 20)
    assert [len(d.conversation) for d in keep] == [10, 20] and dropped == 1
    with pytest.raises(ValueError, match=r"max_context_tokens=5 \(the longest has 50 tokens\).*--max-context-tokens"):
        fitting_demos([demo(10), demo(50)], 5)


def test_truncation_value_zero_prepares_truncated_episodes_as_if_their_final_value_were_0(tiny_dir, tmp_path):
    from dataclasses import replace

    tr = Trainer(_config(tiny_dir, tmp_path, "turn-ppo", normalize_advantages=False))
    with torch.no_grad():
        tr.policy.value_head.bias.fill_(1.0)  # a critic that values every state at about 1 (a fresh one says 0)
    batch = _scripted_batch(tr, ["xyz"], [0, 1, 2, 3])  # never a door: every episode runs into the turn limit
    assert bool(batch.truncated.all()) and bool((batch.bootstrap_pos >= 0).all())
    bootstrapped = tr.prepare(batch).advantages
    no_final_state = tr.prepare(replace(batch, bootstrap_pos=torch.full_like(batch.bootstrap_pos, -1))).advantages
    tr.cfg.algo.truncation_value = "zero"
    zero = tr.prepare(batch).advantages
    assert torch.equal(zero, no_final_state)
    assert not torch.allclose(zero, bootstrapped)


def test_shuffled_reward_prepares_advantages_from_another_episodes_score(tiny_dir, tmp_path):
    """The negative control's wiring: each episode's outcome is a permuted score (GRPO: its group advantage)."""
    tr = Trainer(_config(tiny_dir, tmp_path, "grpo", group_size=1, grpo_scale_by_std=False))
    batch = _scripted_batch(tr, ["xyz"], [0, 1, 2, 3])  # never a door: every score is the same, so shuffle some in
    from dataclasses import replace

    batch = replace(batch, scores=torch.tensor([0.0, 1.0, 2.0, 3.0]), group_ids=torch.zeros(4, dtype=torch.long))
    env = tr.prepare(batch).advantages
    tr.cfg.algo.reward = "shuffled"
    state = tr.generator.get_state()
    shuffled = tr.prepare(batch).advantages
    tr.generator.set_state(state)
    permutation = torch.randperm(4, generator=tr.generator)
    per_episode = (shuffled.sum(1) / batch.action_mask.sum(1)).tolist()
    assert per_episode == pytest.approx([float(batch.scores[i]) - 1.5 for i in permutation.tolist()])
    assert env.sum(1).tolist() != shuffled.sum(1).tolist() or permutation.tolist() == [0, 1, 2, 3]


def test_fit_with_a_known_start_evaluation_runs_the_same_as_playing_it(tiny_dir, tmp_path):
    """``fit(start=...)`` logs a start evaluation measured before (a saved SFT policy's) instead of
    playing it again; evaluations draw on no training RNG, so every record is the same."""
    played = Trainer(_config(tiny_dir, tmp_path / "played"))
    summary = played.fit()
    played.close()
    probe = Trainer(_config(tiny_dir, tmp_path / "probe"))
    start = (probe.evaluate(), probe.last_eval_outcomes)
    probe.close()
    given = Trainer(_config(tiny_dir, tmp_path / "given"))
    summary_given = given.fit(start=start)
    given.close()
    assert (
        summary_given["start_outcomes"] == summary["start_outcomes"]
        and summary_given["end_outcomes"] == summary["end_outcomes"]
    )
    assert _strip_time(read_metrics(tmp_path / "given" / "metrics.jsonl")) == _strip_time(
        read_metrics(tmp_path / "played" / "metrics.jsonl")
    )
    with pytest.raises(ValueError, match="held-out tasks"):
        Trainer(_config(tiny_dir, tmp_path / "short")).fit(start=(start[0], {"score": start[1]["score"][:3]}))


def test_sft_env_kwargs_override_the_env_options_of_expert_play_only(tmp_path):
    """Demonstrations (and the tiny model's corpus) play ``env_kwargs`` with ``sft_env_kwargs`` over them;
    rollouts keep ``env_kwargs``. From the command line too."""
    from reference_trainer.tasks import demo_env_kwargs

    cfg = preset(
        "turn-ppo",
        env="TurnSearchQA-v0",
        env_kwargs={"topk": 1, "question_types": ["single_hop"]},
        sft_env_kwargs={"question_types": None, "expert_recall": ["founded"]},
        out=str(tmp_path),
    )
    merged = demo_env_kwargs(cfg)
    assert merged == {"topk": 1, "question_types": None, "expert_recall": ["founded"]}
    assert cfg.rollout.env_kwargs == {"topk": 1, "question_types": ["single_hop"]}
    args = build_parser().parse_args(
        ["train", "--env", "TurnSearchQA-v0", "--sft-env-kwargs", '{"question_types": null}']
    )
    assert config_from_args(args).train.sft_env_kwargs == {"question_types": None}


@pytest.mark.parametrize("flag", ["--eval-env-kwargs", "--sft-env-kwargs", "--tiny-pretrain"])
def test_dict_options_take_a_json_object_on_the_command_line_and_refuse_anything_else(flag, capsys):
    args = build_parser().parse_args(["train", flag, '{"world_seed": 7}'])
    cfg = config_from_args(args)
    got = cfg.model.tiny.pretrain if flag == "--tiny-pretrain" else getattr(cfg.train, flag[2:].replace("-", "_"))
    assert got == {"world_seed": 7}
    for bad in ("world_seed=7", "[1, 2]"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["train", flag, bad])
        assert "JSON object" in capsys.readouterr().err


def test_the_trainer_records_the_tasks_it_played_as_the_tasks_module_draws_them(tiny_dir, tmp_path):
    from reference_trainer.tasks import rl_task_seeds, sft_seeds

    cfg = _config(tiny_dir, tmp_path, "turn-ppo")
    tr = Trainer(cfg)
    tr.train_iteration()
    tr.train_iteration()
    t = cfg.train
    assert tr.played_tasks == rl_task_seeds(t.seed, t.eval_seed, cfg.rollout.tasks_per_iteration, 2)
    assert all(s < t.eval_seed for s in tr.played_tasks + sft_seeds(t.seed, t.eval_seed, 50))
    tr.close()


def test_sft_to_the_validation_plateau_keeps_the_best_weights_and_stops_after_the_patience(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, tmp_path, "turn-ppo")
    cfg.train.sft_episodes, cfg.train.sft_steps, cfg.train.sft_batch_size, cfg.train.sft_lr = 16, 40, 8, 3e-2
    cfg.train.val_env_kwargs, cfg.train.val_episodes = {"rooms": 4}, 8
    cfg.train.sft_validate_every, cfg.train.sft_patience = 2, 2
    tr = Trainer(cfg)
    stats = tr.sft()
    curve = stats["sft/validation"]
    assert [row[0] for row in curve] == list(range(0, 2 * len(curve), 2))
    values = [s + 1e-3 * sc for _, s, sc in curve]
    best = max(range(len(values)), key=lambda i: (values[i], -i))  # the first of the best
    assert stats["sft/best_step"] == curve[best][0]
    # it stopped after `patience` evaluations without a new best, or at the ceiling
    assert stats["sft/steps"] == min(cfg.train.sft_steps, curve[best][0] + 2 * 2) or curve[-1][0] == cfg.train.sft_steps
    again = tr.evaluate(split="validation", current=True)  # the kept weights are the best evaluation's
    assert math.isclose(again["success"], curve[best][1], abs_tol=1e-9)
    with pytest.raises(ValueError, match="split must be"):
        tr.evaluate(split="train")
    tr.close()


def test_validation_without_a_split_says_what_to_set(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path, "turn-ppo"))
    with pytest.raises(ValueError, match="--val-env-kwargs"):
        tr.evaluate(split="validation")
    tr.close()


def test_evaluation_plays_each_distinct_start_once_and_counts_it_for_every_seed(tiny_dir, tmp_path, monkeypatch):
    """Greedy play is deterministic: seeds that start the same episode (equal start state keys) are played
    once, and the metrics and per-seed outcomes equal those of playing every seed."""
    from agentgym_turn.sokoban.source import SokobanGenerator
    from reference_trainer import evaluation

    generator = SokobanGenerator((6, 6), 1, 1, 10, None, 1000)
    levels = tmp_path / "three.txt"
    levels.write_text("\n".join(f"; {k}\n{generator.level(k).level.to_text()}\n" for k in range(3)))
    cfg = _config(tiny_dir, tmp_path / "run", "turn-ppo", max_new_tokens=8)
    cfg.train.env, cfg.rollout.env_kwargs, cfg.train.eval_episodes = "TurnSokoban-v0", {"levels": str(levels)}, 12
    tr = Trainer(cfg)
    played = []
    orig = tr.rollout
    tr.rollout = lambda seeds, *a, **k: (played.append(list(seeds)), orig(seeds, *a, **k))[1]
    once = tr.evaluate(), dict(tr.last_eval_outcomes)
    assert len(played[0]) == 3 and len(once[1]["seeds"]) == 12  # three levels among twelve draws
    monkeypatch.setattr(
        evaluation, "_distinct_starts", lambda env_id, env_kwargs, seeds: (seeds, list(range(len(seeds))))
    )
    every = tr.evaluate(), dict(tr.last_eval_outcomes)
    assert len(played[1]) == 12
    assert every[1]["success"] == once[1]["success"] and every[1]["seeds"] == once[1]["seeds"]
    assert every[1]["score"] == pytest.approx(once[1]["score"], abs=1e-9)
    assert every[0]["success"] == once[0]["success"] and every[0]["score"] == pytest.approx(once[0]["score"], abs=1e-9)
    tr.close()
