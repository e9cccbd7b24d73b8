"""The GPU-ready paths of the trainer, checked on CPU: chunked log-probs, sampling on the model's
device with and without the KV cache, the dtype choice, the float16 gradient scaler, gradient
checkpointing, and the GPU check's dry run."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from support.paths import ROOT
from support import trainer_envs
from reference_trainer.config import preset
from reference_trainer.logprobs import selected_logprobs
from reference_trainer.policy import Policy, needs_grad_scaler, resolve_dtype, sampling_generator
from reference_trainer.trainer import Trainer
from support.random_models import random_lm

TOL = dict(rtol=1e-6, atol=1e-6)  # float32: the chunks' matrix products round differently, nothing else differs
#: Gradients: the lm head's gradient is a sum over tokens that the chunked path adds up chunk by chunk, in
#: another order; with 40 tokens that rounding reached 1.3e-6 (hypothesis found it), so 1e-5 for gradients.
GRAD_TOL = dict(rtol=1e-5, atol=1e-5)


def _batch(vocab_limit: int, seed: int = 0):
    """Three right-padded rows of 24 tokens, responses from column 9 on."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_limit, (3, 24), generator=g)
    attn = torch.ones_like(ids)
    attn[1, 18:] = 0
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[:, 9:] = True
    positions &= attn.bool()
    return ids, attn, positions


def _grads(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in module.parameters()]


# ---------------------------------------------------------------------- chunked log-probs
@settings(max_examples=12)
@example(n=28, chunk=1, temperature=0.7, softcap=None, masked=False, seed=0)  # once over 1e-6 in the head's gradient
@given(
    n=st.integers(1, 40),
    chunk=st.integers(1, 50),
    temperature=st.sampled_from([1.0, 0.7, 1.6]),
    softcap=st.sampled_from([None, 5.0]),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_chunked_logprobs_equal_the_unchunked_ones_in_value_and_gradient(n, chunk, temperature, softcap, masked, seed):
    V, H = 97, 16
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, H, generator=g).requires_grad_()
    weight = (torch.randn(V, H, generator=g) * 0.5).requires_grad_()
    limit = V - 7 if masked else V
    target = torch.randint(0, limit, (n,), generator=g)

    def logits_fn(h):  # the policy's recipe: float32, softcap, undecodable ids at -inf, temperature
        z = (h @ weight.T).float()
        if softcap:
            z = torch.tanh(z / softcap) * softcap
        z = z.masked_fill(torch.arange(V) >= limit, float("-inf"))
        return z / temperature

    w_ent = torch.linspace(-1, 1, n)  # any weighting of the entropies: their gradient is checked too
    results = []
    for c in (0, chunk):
        lp, ent = selected_logprobs(logits_fn, hidden, target, chunk_tokens=c)
        grads = torch.autograd.grad(lp.sum() + (w_ent * ent).sum(), [hidden, weight])
        results.append((lp, ent, *grads))
    for i, (plain, chunked) in enumerate(zip(*results)):
        torch.testing.assert_close(chunked, plain, **(TOL if i < 2 else GRAD_TOL))  # log-probs and entropies to 1e-6
    assert torch.isfinite(results[1][1]).all()  # masked ids do not turn the entropy into nan


def test_chunked_scoring_keeps_no_full_vocabulary_tensor_for_backward():
    N, H, V, chunk = 64, 8, 500, 16
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(N, H, generator=g).requires_grad_()
    weight = torch.randn(V, H, generator=g).requires_grad_()
    target = torch.randint(0, V, (N,), generator=g)
    saved_sizes: dict[int, list[int]] = {}
    for c in (0, chunk):
        sizes = saved_sizes.setdefault(c, [])

        def pack(t, sizes=sizes):
            sizes.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            lp, ent = selected_logprobs(lambda h: h @ weight.T, hidden, target, chunk_tokens=c)
        (lp.sum() + ent.sum()).backward()
    assert max(saved_sizes[0]) >= N * V  # the plain way keeps [N, V] tensors until backward
    assert max(saved_sizes[chunk]) <= chunk * V  # chunked: inputs only, logits are recomputed chunk by chunk


def test_chunk_size_must_not_be_negative():
    with pytest.raises(ValueError, match="chunk_tokens"):
        selected_logprobs(lambda h: h, torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), chunk_tokens=-1)


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_policy_evaluate_with_chunks_equals_without(arch):
    policy = Policy(random_lm(arch), vocab_limit=290)
    ids, attn, positions = _batch(290)
    runs = []
    for chunk in (0, 5):
        policy.logprob_chunk_tokens = chunk
        policy.zero_grad(set_to_none=True)
        out = policy.evaluate(ids, attn, positions, temperature=0.8)
        (out.logp.sum() + 0.1 * out.entropy.sum() + out.values.sum()).backward()
        runs.append((out.logp.detach(), out.entropy.detach(), _grads(policy)))
    (lp0, ent0, g0), (lp1, ent1, g1) = runs
    torch.testing.assert_close(lp1, lp0, **TOL)
    torch.testing.assert_close(ent1, ent0, **TOL)
    for a, b in zip(g1, g0):  # a whole model's backward sums the chunks' float32 roundings: 1e-5 relative
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert (lp0[positions] < 0).all() and (lp0[~positions] == 0).all()


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_a_right_padded_batch_runs_causal_and_scores_as_with_its_mask(arch, monkeypatch):
    """Right-padded rows go through SDPA's causal kernel without a mask (:func:`trunk_inputs`); their log-probs,
    values and gradients equal those of the masked forward (real tokens see the same context either way)."""
    import reference_trainer.policy as policy_module

    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, attn_mask=None, is_causal=False, **kw):
        calls.append((attn_mask is None, is_causal))
        return sdpa(*args, attn_mask=attn_mask, is_causal=is_causal, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    policy = Policy(random_lm(arch), vocab_limit=290)
    ids, attn, positions = _batch(290)
    masked = lambda m: {"attention_mask": m, "position_ids": (m.long().cumsum(-1) - 1).clamp(min=0)}  # noqa: E731
    runs = []
    for inputs in (masked, policy_module.trunk_inputs):
        monkeypatch.setattr(policy_module, "trunk_inputs", inputs)
        calls.clear()
        policy.zero_grad(set_to_none=True)
        out = policy.evaluate(ids, attn, positions, temperature=0.8)
        real = attn.bool()
        (out.logp.sum() + (out.values * real).sum()).backward()
        runs.append((out.logp.detach(), out.values.detach()[real], _grads(policy), set(calls)))
    (lp0, v0, g0, c0), (lp1, v1, g1, c1) = runs
    assert c0 == {(False, False)} and c1 == {(True, True)}  # the mask, then the causal kernel alone
    torch.testing.assert_close(lp1, lp0, **TOL)
    torch.testing.assert_close(v1, v0, **TOL)
    for a, b in zip(g1, g0):  # the two kernels' backward passes may add up in another order
        torch.testing.assert_close(a, b, **GRAD_TOL)
    holes = attn.clone()
    holes[0, 3] = 0  # a gap inside a row: the mask and its positions are kept
    assert policy_module.trunk_inputs(holes)["attention_mask"] is holes
    assert policy_module.trunk_inputs(attn)["position_ids"] is None


# ---------------------------------------------------------------------- sampling on the device
@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_sampling_with_the_kv_cache_gives_the_same_tokens_as_recomputing_the_prefix(arch, temperature):
    policy = Policy(random_lm(arch, seed=1), vocab_limit=290)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]  # left padding of different widths
    kw = dict(max_new_tokens=12, stop_ids=frozenset({3, 4}), pad_id=0, temperature=temperature)
    cached = policy.generate(prompts, generator=torch.Generator().manual_seed(7), **kw)
    plain = policy.generate(prompts, generator=torch.Generator().manual_seed(7), use_cache=False, **kw)
    assert cached[0] == plain[0]
    for a, b in zip(cached[1], plain[1]):
        assert a == pytest.approx(b, abs=1e-5)
    assert sum(map(len, cached[0])) > 12  # it did sample (not one stop token per row)


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_the_preallocated_kv_cache_samples_bit_for_bit_what_dynamic_cache_does(arch, temperature, monkeypatch):
    """The in-place cache (``policy._kv_cache``) only saves copies: same tokens, same log-probs, exactly,
    also past its capacity (where it grows as ``DynamicCache`` does)."""
    from transformers import DynamicCache

    import reference_trainer.policy as policy_module

    policy = Policy(random_lm(arch, seed=3), vocab_limit=290)
    prompts = [[5 + (i * 7 + j) % 280 for j in range(n)] for i, n in enumerate([40, 3, 17, 29])]
    kw = dict(max_new_tokens=16, stop_ids=frozenset({3}), pad_id=0, temperature=temperature)
    ours = policy.generate(prompts, generator=torch.Generator().manual_seed(11), **kw)
    original = policy_module._kv_cache
    assert all(type(layer).__name__ == "PreallocatedLayer" for layer in original(policy.lm.config, 8).layers)
    # a capacity smaller than the prompts: the growth path
    monkeypatch.setattr(policy_module, "_kv_cache", lambda config, capacity: original(config, 8))
    grown = policy.generate(prompts, generator=torch.Generator().manual_seed(11), **kw)
    monkeypatch.setattr(policy_module, "_kv_cache", lambda config, capacity: DynamicCache(config=config))
    theirs = policy.generate(prompts, generator=torch.Generator().manual_seed(11), **kw)
    assert ours == theirs == grown  # ids and float log-probs, compared exactly
    assert sum(map(len, ours[0])) > 16


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_left_padding_does_not_change_a_prompts_greedy_response(arch, dtype):
    # large random weights make the response depend on the context: attending to the pads (pad id 0
    # read as tokens) changes the first greedy token of the short prompts
    policy = Policy(random_lm(arch, seed=5, init_std=0.3), compute_dtype=dtype, vocab_limit=290)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15], [16, 17, 18, 19]]
    kw = dict(max_new_tokens=6, stop_ids=frozenset(), pad_id=0, temperature=0.0, generator=torch.Generator())
    batched = policy.generate(prompts, **kw)
    for i, prompt in enumerate(prompts):
        alone = policy.generate([prompt], **kw)
        assert alone[0][0] == batched[0][i]
        assert alone[1][0] == pytest.approx(
            batched[1][i], abs=1e-5 if dtype is None else 5e-2
        )  # bf16: 8 mantissa bits, 6 steps
    wrong = policy.generate([[0] * 7 + prompts[1]], **{**kw, "max_new_tokens": 1})  # the pads as real tokens
    assert wrong[0][0][0] != batched[0][1][0]  # (so the comparison above can fail)


def test_sampling_draws_from_the_callers_generator_on_cpu():
    policy = Policy(random_lm(seed=2), vocab_limit=290)
    gen = torch.Generator().manual_seed(3)
    assert sampling_generator(gen, "cpu") is gen  # CPU runs draw the same numbers as before (the behaviour fixture)
    kw = dict(max_new_tokens=6, stop_ids=frozenset(), pad_id=0)
    first = policy.generate([[5, 6, 7]] * 4, generator=torch.Generator().manual_seed(3), **kw)
    again = policy.generate([[5, 6, 7]] * 4, generator=torch.Generator().manual_seed(3), **kw)
    other = policy.generate([[5, 6, 7]] * 4, generator=torch.Generator().manual_seed(4), **kw)
    assert first == again and first[0] != other[0]
    # reference: the draws of torch.multinomial on the probability table, one step at a time
    gen = torch.Generator().manual_seed(3)
    ids = torch.tensor([[5, 6, 7]] * 4)
    for j in range(6):
        logits = policy.logits_from_hidden(policy.lm.model(ids).last_hidden_state[:, -1])
        token = torch.multinomial(torch.log_softmax(logits, -1).exp(), 1, generator=gen)
        assert token.squeeze(-1).tolist() == [row[j] for row in first[0]]
        ids = torch.cat([ids, token], 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_sampling_uses_a_device_generator_seeded_from_the_callers():
    gen = torch.Generator().manual_seed(0)
    dev = sampling_generator(gen, "cuda")
    assert dev.device.type == "cuda"
    assert sampling_generator(torch.Generator().manual_seed(0), "cuda").initial_seed() == dev.initial_seed()


# ---------------------------------------------------------------------- precision and memory options
@pytest.mark.parametrize(
    "dtype, device, bf16, expected",
    [
        ("auto", "cuda", True, "bfloat16"),
        ("auto", "cuda:1", True, "bfloat16"),
        ("auto", "cuda", False, "float16"),
        ("auto", "cpu", True, "float32"),
        ("auto", "mps", True, "float32"),
        ("float16", "cuda", True, "float16"),
        ("bfloat16", "cpu", True, "bfloat16"),
        ("float32", "cuda", True, "float32"),
    ],
)
def test_auto_dtype_is_bfloat16_on_cuda_and_float32_elsewhere(dtype, device, bf16, expected):
    assert resolve_dtype(dtype, device, bf16_supported=bf16) == expected


def test_an_unknown_dtype_names_the_option():
    with pytest.raises(ValueError, match="--dtype"):
        resolve_dtype("fp8", "cuda")


def test_only_float16_needs_a_gradient_scaler():
    assert needs_grad_scaler(torch.float16)
    assert not any(needs_grad_scaler(d) for d in (None, torch.float32, torch.bfloat16))


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_gradient_checkpointing_gives_the_same_gradients_and_keeps_generation(arch):
    policy = Policy(random_lm(arch, seed=4), vocab_limit=290)
    ids, attn, positions = _batch(290, seed=1)
    prompts, kw = [[5, 6, 7], [8, 9]], dict(max_new_tokens=5, stop_ids=frozenset(), pad_id=0)
    runs = []
    for checkpointed in (False, True):
        if checkpointed:
            policy.enable_gradient_checkpointing()
        policy.zero_grad(set_to_none=True)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
            out = policy.evaluate(ids, attn, positions)
        (out.logp.sum() + out.entropy.sum() + out.values.sum()).backward()
        sample = policy.generate(prompts, generator=torch.Generator().manual_seed(0), **kw)
        runs.append((out.logp.detach(), _grads(policy), sum(saved), sample))
    (lp0, g0, saved0, sample0), (lp1, g1, saved1, sample1) = runs
    torch.testing.assert_close(lp1, lp0, rtol=0, atol=0)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert saved1 < saved0  # the layers' activations were not kept: checkpointing really ran
    assert sample1 == sample0  # generation (no gradients) keeps its KV cache
    assert not any(m.training for m in policy.lm.modules())  # eval mode restored: dropout stays off


def test_the_command_line_has_the_gpu_options_with_defaults_that_change_nothing():
    from reference_trainer.cli import build_parser, config_from_args

    p = build_parser()
    cfg = config_from_args(
        p.parse_args(["train", "--dtype", "auto", "--logprob-chunk-tokens", "512", "--gradient-checkpointing"])
    )
    assert (cfg.model.dtype, cfg.model.logprob_chunk_tokens, cfg.model.gradient_checkpointing) == ("auto", 512, True)
    default = config_from_args(p.parse_args(["train"]))
    assert (default.model.dtype, default.model.logprob_chunk_tokens, default.model.gradient_checkpointing) == (
        "auto",
        0,
        False,
    )


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


def _config(tiny_dir, out, **kw):
    return preset(
        "st-ppo",
        **{
            "model": tiny_dir,
            "tasks_per_iteration": 8,
            "num_envs": 8,
            "max_new_tokens": 3,
            "minibatch_size": 4,
            "micro_batch_size": 2,
            "epochs": 1,
            "lr": 3e-3,
            "env": trainer_envs.ENV_ID,
            "iterations": 1,
            "eval_episodes": 4,
            "eval_every": 0,
            "out": str(out),
            "progress": False,
            **kw,
        },
    )


def test_float16_training_scales_the_loss_and_stays_finite(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path, dtype="float16", sft_episodes=4, sft_steps=2, sft_batch_size=4))
    try:
        assert tr.scaler is not None and tr.scaler.get_scale() > 1
        before = [p.detach().clone() for p in tr.policy.parameters()]
        tr.sft()
        m = tr.train_iteration()
        assert all(math.isfinite(v) for v in m.values())
        assert all(torch.isfinite(p).all() for p in tr.policy.parameters())
        assert any(
            not torch.equal(a, b) for a, b in zip(before, tr.policy.parameters())
        )  # the scaled steps moved weights
        assert m["train/grad_norm"] < 1e3  # clipping saw the unscaled gradient, not one 65536 times larger
    finally:
        tr.close()
    tr32 = Trainer(_config(tiny_dir, tmp_path / "f32"))
    assert tr32.scaler is None
    tr32.close()


def test_a_float16_checkpoint_resumes_at_its_loss_scale(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path, dtype="float16"))
    try:
        tr.scaler.scale(torch.ones(()))  # the scaler starts lazily, at its first scaled loss
        tr.scaler.update(new_scale=1234.0)  # as after some skipped (overflowing) steps
        saved = tr.save_checkpoint(tmp_path / "ckpt")
    finally:
        tr.close()
    resumed = Trainer(_config(tiny_dir, tmp_path / "resumed", dtype="float16", resume=str(saved)))
    try:
        assert resumed.scaler.get_scale() == 1234.0
    finally:
        resumed.close()


def test_trainer_options_reach_the_policy(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path, logprob_chunk_tokens=7, gradient_checkpointing=True))
    try:
        assert tr.policy.logprob_chunk_tokens == 7 and tr.policy._checkpointed
        m = tr.train_iteration()
        assert all(math.isfinite(v) for v in m.values())
    finally:
        tr.close()


# ---------------------------------------------------------------------- the GPU check
def test_the_gpu_check_dry_run_measures_the_chunked_and_float16_paths():
    """benchmarks/gpu_check.sh (the prepared run for a lent GPU) on a tiny config on CPU: it must not rot between GPU runs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "--dry-run"],
        env={**env, "PYTHON": sys.executable},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(p.stdout[p.stdout.index("{") :])
    assert result["finite"] and result["iteration_metrics"]["rollout/episodes"] == 4
    for path in ("plain", "chunked", "float16_scaler"):
        assert result["update"][path]["tokens_per_s"] > 0, path
    assert result["update"]["chunked"]["logprob_chunk_tokens"] > 0
