"""Copy pretraining of the tiny model: next-token loss on whole expert episodes of many worlds.

The search QA diagnosis: a tiny model fine-tuned only on the responses of one world's
expert learns the tags but never copies an unseen coined name from the question into its
query, or the answer out of the passage. Copying is what a 2-layer model learns through
induction heads, and whole episodes are full of copies (the query repeats the question's name,
the passage title repeats the query, the passage repeats its title). So
:func:`build_pretrained_tiny` trains the tiny model's tokenizer on the text of many generated
worlds, then trains the model with next-token loss on **every** token (prompt, responses and
observations) of expert episodes drawn from those worlds, where learning facts by heart cannot
lower the loss and copying can. The result is an ordinary checkpoint directory that
:func:`reference_trainer.policy.load_policy` reads, the start of the trainer's SFT.

Deterministic from its settings (corpus, sizes, seeds), offline, and cached like
:func:`reference_trainer.tiny.build_tiny` (a finished build is reused from the cache key).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .model import TinySpec, _model_config, default_cache_dir, env_corpus, publish_build, train_tokenizer

_BUILD_VERSION = 1  # bump when the construction changes, to invalidate caches


@dataclass(frozen=True)
class PretrainSpec:
    """What the copy pretraining sees and how long it trains."""

    #: World seeds whose expert episodes train tokenizer and model (never a held-out world).
    worlds: tuple[int, ...] = tuple(range(1000, 1016))
    #: ``world_scale`` of those worlds (a smaller world generates faster; names are as varied).
    world_scale: float = 0.25
    #: The env option that takes a world's seed (``world_seed`` for TurnSearchQA-v0, ``catalog_seed`` for TurnWebShop-v0).
    world_option: str = "world_seed"
    #: The env option that takes ``world_scale`` (``None``: the env's own size, for envs without one).
    scale_option: str | None = "world_scale"
    #: Expert episodes per world for the model (distinct task seeds).
    episodes_per_world: int = 128
    #: Env episodes per world played for the tokenizer's corpus (:func:`reference_trainer.tiny.env_corpus`).
    corpus_episodes_per_world: int = 64
    steps: int = 600  # optimizer steps (0: only the tokenizer of many worlds and the seeded induction circuit)
    batch_size: int = 16  # episodes per step
    lr: float = 3e-3  # AdamW learning rate (constant after warm-up)
    warmup_steps: int = 20  # linear learning-rate warm-up, in steps
    seed: int = 0  # task seeds and batch order
    #: Heads per layer set to a previous-token / induction circuit before training (:func:`seed_induction_heads`; 0: none).
    induction_heads: int = 2
    #: Loss weight of the expert's response tokens relative to the other tokens (1: plain next-token loss).
    response_weight: float = 1.0
    #: Env options over the run's for the episodes of these worlds (tokenizer corpus and pretraining), e.g.
    #: ``{"expert_recall": []}``: the pretraining teaches copying, not a demonstrator's habits.
    env_kwargs: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, value: dict[str, Any] | str) -> "PretrainSpec":
        """The spec of ``TinyConfig.pretrain`` (``--tiny-pretrain``): a dict of fields, or its JSON text (from the command line)."""
        fields = json.loads(value) if isinstance(value, str) else dict(value)
        unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
        if unknown:
            raise TypeError(
                f"tiny_pretrain: unknown field(s) {unknown}; the fields are those of "
                f"reference_trainer.tiny.PretrainSpec: {sorted(cls.__dataclass_fields__)}."
            )
        if "worlds" in fields:
            fields["worlds"] = tuple(int(w) for w in fields["worlds"])
        return cls(**fields)


def pretrain_world_seeds(seed: int, worlds: Sequence[int], episodes_per_world: int) -> list[list[int]]:
    """The reset seeds of copy pretraining (:func:`world_episodes`), one list per world."""
    rng = np.random.default_rng([int(seed), 2])
    return [rng.integers(0, 2**31 - 1, size=episodes_per_world).tolist() for _ in worlds]


def world_kwargs(env_kwargs: dict[str, Any] | None, world: int, spec: PretrainSpec) -> dict[str, Any]:
    """``env_kwargs`` with world ``world`` of ``spec`` (its seed and, where the env has one, its scale)."""
    scale = {spec.scale_option: float(spec.world_scale)} if spec.scale_option else {}
    return {**(env_kwargs or {}), **spec.env_kwargs, spec.world_option: int(world), **scale}


def world_corpus(env_id: str, env_kwargs: dict[str, Any] | None, spec: PretrainSpec) -> list[str]:
    """The tokenizer's training text: :func:`~reference_trainer.tiny.env_corpus` of every world of ``spec``."""
    texts: list[str] = []
    for w in spec.worlds:
        texts += env_corpus(
            env_id, spec.corpus_episodes_per_world, seed=spec.seed, env_kwargs=world_kwargs(env_kwargs, w, spec)
        )
    return texts


def world_episodes(env_id: str, env_kwargs: dict[str, Any] | None, spec: PretrainSpec, fmt: Any) -> list[Any]:
    """Expert episodes (:func:`~reference_trainer.rollout.expert_episodes`), ``spec.episodes_per_world`` per world,
    assembled with chat format ``fmt``; task seeds drawn from ``spec.seed``."""
    from ..rollout import expert_episodes

    episodes: list[Any] = []
    for w, seeds in zip(spec.worlds, pretrain_world_seeds(spec.seed, spec.worlds, spec.episodes_per_world)):
        episodes += expert_episodes(env_id, fmt, seeds, world_kwargs(env_kwargs, w, spec))
    return episodes


def pretrain_weights(attention_mask: Any, action_mask: Any, response_weight: float) -> Any:
    """Per-token loss weights ``w[b, t]``: 0 on padding, ``response_weight`` on response tokens, 1 elsewhere."""
    return attention_mask.float() + (response_weight - 1.0) * action_mask.float()


def weighted_next_token_loss(logits: Any, ids: Any, weights: Any) -> Any:
    """``sum_t w[t+1] * (-log p(ids[t+1] | ids[:t+1])) / sum_t w[t+1]`` over a right-padded batch
    (``docs/algorithms.md``, "Copy pretraining"). ``logits [B, L, V]`` of ``ids [B, L]``, ``weights [B, L]``
    (:func:`pretrain_weights`): the weight of a prediction is that of the token it predicts."""
    import torch

    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
    )
    w = weights[:, 1:].reshape(-1)
    return (nll * w).sum() / w.sum()


def lm_pretrain(lm: Any, episodes: Sequence[Any], pad_id: int, spec: PretrainSpec) -> list[float]:
    """Train causal LM ``lm`` in place with next-token cross-entropy on every token of ``episodes``
    (padding excluded; response tokens weighted ``spec.response_weight``); returns each step's weighted
    mean loss (nats per token)."""
    import torch

    from ..policy import trunk_inputs
    from ..rollout import make_batch

    if spec.steps <= 0:
        return []
    if not episodes:
        raise ValueError("tiny_pretrain: no episodes to pretrain on; give episodes_per_world > 0 (or steps 0).")
    batch = make_batch(list(episodes), pad_id)
    ids, mask = batch.ids, batch.attention_mask
    weight = pretrain_weights(mask, batch.action_mask, spec.response_weight)  # [B, L]: 0 on padding
    opt = torch.optim.AdamW(lm.parameters(), lr=spec.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (spec.warmup_steps + 1)))
    gen = torch.Generator().manual_seed(spec.seed)
    lm.train()
    losses: list[float] = []
    for _ in range(spec.steps):
        idx = torch.randint(len(ids), (min(spec.batch_size, len(ids)),), generator=gen)
        m = mask[idx]
        n = int(m.sum(1).max())  # right-padded: cut the all-padding tail
        x, m, w = ids[idx, :n], m[:, :n], weight[idx, :n]
        loss = weighted_next_token_loss(lm(input_ids=x, **trunk_inputs(m)).logits, x, w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    lm.eval()
    return losses


def _cache_key(env_id: str, env_kwargs: dict[str, Any] | None, tiny: Any, spec: PretrainSpec, seed: int) -> str:
    # the settings only (the worlds are generated from them): checking the cache costs no world generation
    blob = json.dumps(
        {
            "env": env_id,
            "env_kwargs": env_kwargs or {},
            "tiny": asdict(tiny),
            "pretrain": asdict(spec),
            "seed": seed,
            "v": _BUILD_VERSION,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_pretrained_tiny(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    tiny: Any = None,
    spec: PretrainSpec = PretrainSpec(),
    seed: int = 0,
    directory: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Build (or reuse) a copy-pretrained tiny checkpoint directory; return its path.

    Args:
        env_id: The env whose expert episodes train tokenizer and model.
        env_kwargs: Options of that env (its observation style); ``spec.world_option`` and
            ``spec.scale_option`` are set per world of ``spec``.
        tiny: :class:`~reference_trainer.tiny.TinySpec` of the model and vocabulary (default sizes if None).
        spec: The pretraining's worlds, data and steps.
        seed: Seeds the weight initialisation.
        directory: Where to write; default ``cache_dir/<key>`` (reused when complete).
        cache_dir: Default :func:`reference_trainer.tiny.default_cache_dir`.
    """
    import time

    import torch
    from transformers import AutoModelForCausalLM

    from agentgym_turn.tokens import ChatFormat

    tiny = tiny or TinySpec()
    key = _cache_key(env_id, env_kwargs, tiny, spec, seed)
    out = Path(directory) if directory is not None else Path(cache_dir or default_cache_dir()) / f"pretrained-{key}"
    stamp = out / "tiny_build.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("key") == key:
        return out

    t0 = time.perf_counter()
    tokenizer = train_tokenizer(world_corpus(env_id, env_kwargs, spec), tiny.vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lm = AutoModelForCausalLM.from_config(_model_config(tiny, len(tokenizer), tokenizer))
    if spec.induction_heads:
        seed_induction_heads(lm, heads=spec.induction_heads, seed=seed)
    # no steps: the tokenizer of many worlds and the seeded circuit only (no episodes to generate)
    episodes = world_episodes(env_id, env_kwargs, spec, ChatFormat(tokenizer)) if spec.steps > 0 else []
    t1 = time.perf_counter()
    losses = lm_pretrain(lm, episodes, tokenizer.pad_token_id, spec)
    t2 = time.perf_counter()
    return publish_build(
        out,
        lm,
        tokenizer,
        {
            "key": key,
            "env_ids": [env_id],
            "seed": seed,
            "spec": asdict(tiny),
            "pretrain": asdict(spec),
            "episodes": len(episodes),
            "tokens": sum(len(e.conversation) for e in episodes),
            "loss_first": losses[0] if losses else None,
            "loss_last": sum(losses[-10:]) / max(1, len(losses[-10:])),
            "data_seconds": t1 - t0,
            "train_seconds": t2 - t1,
        },
    )


def previous_token_bias(
    inv_freq: Sequence[float], pairs: Sequence[int], head_dim: int, max_positions: int, margin: float
) -> tuple[list[float], list[float]]:
    """Query and key biases of one rotary attention head that attends to the previous position.

    With zero query/key weights a head's score between positions ``m`` and ``n`` depends on
    ``m - n`` only: ``sum_i a_i^2 cos((m - n - 1) * inv_freq[i])`` over the rotary ``pairs`` used,
    highest at ``m - n = 1``. The amplitudes are scaled so that every other distance below
    ``max_positions`` scores at least ``margin`` lower (after the ``1/sqrt(head_dim)`` scaling).
    Returns ``(q_bias, k_bias)``, ``head_dim`` values each, in the rotate-half layout (pair ``i``
    is dimensions ``i`` and ``i + head_dim/2``).
    """
    half = head_dim // 2
    theta = np.asarray(inv_freq, dtype=np.float64)[list(pairs)]
    gap = np.delete(np.arange(max_positions, dtype=np.float64) - 1.0, 1)  # every distance but 1, minus 1
    worst = float(np.min((1.0 - np.cos(np.outer(gap, theta))).sum(1)))  # smallest score drop, unit amplitudes
    amp = float(np.sqrt(margin * np.sqrt(head_dim) / worst))
    q, k = [0.0] * head_dim, [0.0] * head_dim
    for i, t in zip(pairs, theta):
        q[i] = amp
        k[i], k[i + half] = amp * float(np.cos(t)), amp * float(np.sin(t))
    return q, k


def seed_induction_heads(
    lm: Any,
    *,
    heads: int = 2,
    position_pairs: int = 4,
    margin: float = 8.0,
    write_scale: float = 0.3,
    match_scale: float = 3.0,
    copy_scale: float = 6.0,
    seed: int = 0,
) -> None:
    """Set the weights of a Qwen2-style ``lm`` (rotary, q/k/v biases, >= 2 layers) to an induction circuit, in place.

    Layer 0, heads ``0..heads-1``: previous-token heads (:func:`previous_token_bias`); each reads
    the token through a 16-dim basis ``R_h`` and writes it into another, ``U_h``. Layer 1, the
    same heads: induction heads; the query reads the current token in ``R_h``, the key the
    previous token in ``U_h`` (in the rotary pairs that barely rotate), so a position whose
    previous token is the current one scores high, and the value copies that position's token
    (``R_h`` in, ``R_h`` out: through the tied embeddings it raises that token's logit). The
    other heads' outputs and the MLPs' down projections start at zero (residual branches that
    add nothing until trained). Training then starts from a model that already copies
    continuations of text seen before in its context, instead of waiting for the circuit to form.
    """
    import torch

    cfg = lm.config
    d, n_heads = cfg.hidden_size, cfg.num_attention_heads
    hd = d // n_heads
    half = hd // 2
    if (
        getattr(cfg, "model_type", "") != "qwen2"
        or cfg.num_hidden_layers < 2
        or 4 * heads * hd > d * 2
        or 2 * heads * hd > d
    ):
        raise ValueError(
            f"seed_induction_heads needs a qwen2 model with >= 2 layers and hidden_size >= 2 * heads * head_dim "
            f"(got {getattr(cfg, 'model_type', '?')}, {cfg.num_hidden_layers} layers, hidden {d}, head_dim {hd}, heads={heads})."
        )
    inv_freq = lm.model.rotary_emb.inv_freq.double().tolist()  # the frequencies the model rotates by
    pos_pairs = list(range(position_pairs))
    still = list(range(position_pairs, half))  # pairs that barely rotate: content matching
    still_dims = still + [i + half for i in still]
    basis = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))[0].T  # rows: an orthonormal basis
    q_bias, k_bias = previous_token_bias(inv_freq, pos_pairs, hd, cfg.max_position_embeddings, margin)
    layers = lm.model.layers
    with torch.no_grad():
        for layer in layers:
            layer.mlp.down_proj.weight.zero_()
            layer.self_attn.o_proj.weight.zero_()
        prev, ind = layers[0].self_attn, layers[1].self_attn
        for h in range(heads):
            rows = slice(h * hd, (h + 1) * hd)
            r = torch.tensor(basis[2 * h * hd : (2 * h + 1) * hd], dtype=torch.float32)  # R_h: hd x d
            u = torch.tensor(basis[(2 * h + 1) * hd : (2 * h + 2) * hd], dtype=torch.float32)  # U_h
            # previous-token head: position-only scores, value = R_h x, output written along U_h
            prev.q_proj.weight[rows] = 0.0
            prev.k_proj.weight[rows] = 0.0
            prev.q_proj.bias[rows] = torch.tensor(q_bias)
            prev.k_proj.bias[rows] = torch.tensor(k_bias)
            prev.v_proj.weight[rows] = r
            prev.v_proj.bias[rows] = 0.0
            prev.o_proj.weight[:, rows] = write_scale * u.T
            # induction head: query R_h (current token), key U_h (previous token), in the still pairs
            ind.q_proj.weight[rows] = 0.0
            ind.k_proj.weight[rows] = 0.0
            ind.q_proj.bias[rows] = 0.0
            ind.k_proj.bias[rows] = 0.0
            for j, dim in enumerate(still_dims):
                ind.q_proj.weight[h * hd + dim] = match_scale * r[j]
                ind.k_proj.weight[h * hd + dim] = match_scale * u[j]
            ind.v_proj.weight[rows] = r
            ind.v_proj.bias[rows] = 0.0
            ind.o_proj.weight[:, rows] = copy_scale * r.T
