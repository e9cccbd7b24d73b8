"""The policy: a Hugging Face causal LM plus a value head (shared trunk) or a separate critic.

Shapes: ``B`` sequences, ``L`` tokens, ``H`` hidden size, ``V`` vocabulary, ``N`` selected
(action) positions. Everything the trainer needs from the network comes from
:meth:`Policy.evaluate`, which returns per-token log-probabilities and entropies only where
asked (the ``[N, V]`` logits are the big tensor on real vocabularies) and values at every
position.

Alignment: ``logp[b, t] = log pi(ids[b, t] | ids[b, :t])`` comes from the hidden state at
``t - 1``; ``values[b, j]`` is the value head on the hidden state at ``j``, i.e. the value of
the state that ends with token ``j``. The value of turn ``k`` is ``values[b, start_k - 1]``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .logprobs import selected_logprobs
from .model_files import ModelFileError, check_json_files, check_regular_file, check_template_renders

__all__ = [
    "Policy",
    "PolicyOutput",
    "TurnCache",
    "load_policy",
    "load_tokenizer",
    "save_policy",
    "DTYPES",
    "resolve_dtype",
    "nucleus_logits",
    "needs_grad_scaler",
    "sampling_generator",
    "trunk_inputs",
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_VALUE_HEAD_FILE = "value_head.pt"
_CRITIC_DIR = "critic"
_POLICY_META = "policy.json"


@dataclass
class PolicyOutput:
    """``logp``/``entropy``: ``[B, L]`` float32, zero outside ``positions``; ``values``: ``[B, L]`` float32."""

    logp: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor | None


def trunk_inputs(attention_mask: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """The ``attention_mask`` and ``position_ids`` a scoring or training forward of a ``[B, L]`` batch passes: an
    all-ones mask and default positions where every row is right-padded (its real tokens, then padding), else the mask
    and positions counted over the real tokens. With the former a real token sees the same context at the same
    position, and SDPA takes its causal kernel, which skips the blocks above the diagonal instead of masking them
    (Transformers builds a full mask whenever there is padding or positions stall over it). Padding positions see
    other padding then; nothing reads them."""
    n = attention_mask.shape[-1]
    lengths = attention_mask.sum(-1, keepdim=True)
    if torch.equal(attention_mask.bool(), torch.arange(n, device=attention_mask.device) < lengths):
        return {"attention_mask": torch.ones_like(attention_mask), "position_ids": None}
    return {"attention_mask": attention_mask, "position_ids": (attention_mask.long().cumsum(-1) - 1).clamp(min=0)}


def _cache_kwarg(model: nn.Module) -> str:
    """``cache`` in recent transformers, ``past_key_values`` before."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@functools.lru_cache(maxsize=None)
def _preallocated_layer() -> type | None:
    """transformers' ``DynamicLayer`` with in-place writes into a preallocated buffer (see :func:`_kv_cache`);
    ``None`` for a transformers without cache layers."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return None

    class PreallocatedLayer(DynamicLayer):
        capacity = 0  # positions allocated at the first update (set per instance)

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                b, h, n, _ = key_states.shape
                size = max(self.capacity, n)
                self._k = key_states.new_empty((b, h, size, key_states.shape[-1]))
                self._v = value_states.new_empty((b, h, size, value_states.shape[-1]))
                self._n = 0
            n = self._n + key_states.shape[-2]
            if n > self._k.shape[-2]:  # past the capacity: grow as DynamicLayer does
                self._k = torch.cat([self._k[..., : self._n, :], key_states], dim=-2)
                self._v = torch.cat([self._v[..., : self._n, :], value_states], dim=-2)
            else:
                self._k[..., self._n : n, :] = key_states
                self._v[..., self._n : n, :] = value_states
            self._n = n
            self.keys, self.values = self._k[..., :n, :], self._v[..., :n, :]
            return self.keys, self.values

    return PreallocatedLayer


def _kv_cache(config: Any, capacity: int) -> Any:
    """The KV cache of one :meth:`Policy.generate` call, holding ``capacity`` positions without copying.

    transformers' ``DynamicCache`` concatenates each new position onto the whole cache: a copy of
    every key and value per token and layer (a sixth of the rollout time at a 768-token context
    here). Its plain layers are replaced by ones that allocate ``capacity`` positions at the first
    update and write later positions in place; attention reads the filled part as a view (the same
    values in the same shape), so outputs equal ``DynamicCache``'s bit for bit
    (``tests/reference_trainer/test_policy_gpu_path.py``). Other layer kinds (sliding windows) are kept as they are."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config) if "config" in inspect.signature(DynamicCache).parameters else DynamicCache()
    layer_class = _preallocated_layer()
    layers = getattr(cache, "layers", None)
    if layer_class is None or not layers or any(type(layer) is not layer_class.__base__ for layer in layers):
        return cache
    cache.layers = [layer_class() for _ in layers]
    for layer in cache.layers:
        layer.capacity = capacity
    return cache


class TurnCache:
    """The keys and values of the conversations one rollout plays, kept from one turn to the next.

    Without it every turn runs each whole conversation through the model again before sampling
    (at a 768-token context about half of a rollout's time). With it, :meth:`Policy.generate`
    looks up each prompt by its ``key`` (an episode's index): the tokens the cache holds for that
    key, when they begin the prompt, are reused, and only the rest (the last response's unfed
    tail and the new observation) runs through the model. Keys and values carry their positions
    (learned or rotary), so reusing them gives what recomputing would, up to float rounding.
    Between turns each row keeps only its conversation's positions (a row's pads, and the tokens
    sampled after its stop id, are dropped), so the cache is as wide as the longest conversation.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []  # per layer [n, heads, W, head_dim]
        self.values: list[torch.Tensor] = []
        self.mask: torch.Tensor | None = None  # [n, W]: 1 where a position holds a conversation token
        self.rows: dict[int, int] = {}  # key -> row
        self.tokens: dict[int, list[int]] = {}  # key -> the tokens its row holds, in order

    def cached_prefix(self, key: int, prompt: list[int]) -> int:
        """How many leading tokens of ``prompt`` the cache holds for ``key`` (0: none); always leaves one to run."""
        held = self.tokens.get(key)
        if not held or len(held) >= len(prompt) or prompt[: len(held)] != held:
            return 0
        return len(held)

    def gather(
        self, sources: list[int], lengths: list[int]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """Rows ``sources`` (-1: none) with their last ``lengths`` held positions, left-padded to the longest:
        per layer keys and values ``[n, heads, P, head_dim]`` and the ``[n, P]`` mask."""
        assert self.mask is not None
        n, width = len(sources), max(lengths)
        device = self.mask.device
        index = torch.zeros((n, width), dtype=torch.long, device=device)
        mask = torch.zeros((n, width), dtype=torch.long, device=device)
        for i, (src, c) in enumerate(zip(sources, lengths)):
            if c:
                held = torch.nonzero(self.mask[src], as_tuple=True)[0]
                index[i, width - c :] = held[-c:]
                mask[i, width - c :] = 1
        rows = torch.tensor([max(s, 0) for s in sources], dtype=torch.long, device=device)
        keys, values = [], []
        for k, v in zip(self.keys, self.values):
            at = index[:, None, :, None].expand(n, k.shape[1], width, k.shape[-1])
            keys.append(k[rows].gather(2, at))
            values.append(v[rows].gather(2, at))
        return keys, values, mask


def _softcap(model: nn.Module) -> float | None:
    cap = getattr(model.config, "final_logit_softcapping", None)
    return float(cap) if cap else None


def nucleus_logits(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """``logits`` ``[B, V]`` with every token outside the nucleus set to -inf: per row, the most probable tokens whose
    probabilities sum to at least ``top_p`` are kept (always the most probable one)."""
    sorted_logits, order = logits.sort(-1, descending=True)
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # the mass of the tokens ranked above each one
    drop_sorted = before >= top_p
    drop_sorted[..., 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def resolve_dtype(dtype: str, device: str | torch.device, *, bf16_supported: bool = True) -> str:
    """The compute dtype a ``--dtype`` value means on ``device``: ``"auto"`` is bfloat16 on CUDA
    (float16 on a GPU without bfloat16, ``bf16_supported=False``) and float32 elsewhere; any
    other value of :data:`DTYPES` is itself."""
    if dtype == "auto":
        if torch.device(device).type != "cuda":
            return "float32"
        return "bfloat16" if bf16_supported else "float16"
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(DTYPES)}, got {dtype!r} (--dtype).")
    return dtype


def needs_grad_scaler(compute_dtype: torch.dtype | None) -> bool:
    """float16 autocast needs loss scaling (its gradients underflow below ~6e-8); bfloat16 and float32 do not."""
    return compute_dtype == torch.float16


def sampling_generator(generator: torch.Generator, device: str | torch.device) -> torch.Generator:
    """The generator to sample on ``device`` with: ``generator`` itself when it lives there, else a
    generator on ``device`` seeded by one draw from ``generator`` (so the probabilities never go to
    the host, and a run stays reproducible from ``generator``'s state alone)."""
    device = torch.device(device)
    here = generator.device
    if here.type == device.type and (device.index is None or here.index in (None, device.index)):
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


class Policy(nn.Module):
    """Actor (a causal LM) and critic (value head on the LM's trunk, or a separate model).

    Args:
        lm: A ``transformers`` causal LM.
        critic_trunk: ``None`` for the shared trunk (the Turn-PPO paper's set-up), or a
            separate ``transformers`` base model whose last hidden state feeds the value head.
        compute_dtype: ``torch.bfloat16``/``float16`` runs forward passes under autocast while
            the parameters (and AdamW's state) stay float32, so small learning rates are not
            rounded away; ``None`` or ``float32`` computes in float32.
        vocab_limit: Ids ``>= vocab_limit`` (embedding rows the tokenizer cannot decode, e.g.
            padding rows of a model's vocabulary) get logit ``-inf`` when sampling *and* when
            scoring, so the sampled and trained distributions are the same.
        logprob_chunk_tokens: ``0`` scores all selected tokens of :meth:`evaluate` at once; ``c > 0``
            ``c`` tokens at a time, never holding the full ``[N, V]`` float32 logits
            (:func:`~reference_trainer.logprobs.selected_logprobs`).
    """

    def __init__(
        self,
        lm: nn.Module,
        critic_trunk: nn.Module | None = None,
        *,
        compute_dtype: torch.dtype | None = None,
        vocab_limit: int | None = None,
        logprob_chunk_tokens: int = 0,
    ):
        super().__init__()
        self.lm = lm
        self.critic_trunk = critic_trunk
        self.compute_dtype = None if compute_dtype in (None, torch.float32) else compute_dtype
        vocab = lm.get_output_embeddings().weight.shape[0]
        self.vocab_limit = vocab_limit if vocab_limit is not None and vocab_limit < vocab else None
        hidden = (critic_trunk or lm).config.hidden_size
        self.value_head = nn.Linear(hidden, 1, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)  # V = 0 at the start: no wild first advantages
        nn.init.zeros_(self.value_head.bias)
        self._cache_kw = _cache_kwarg(lm)
        self._softcap = _softcap(lm)
        self.logprob_chunk_tokens = logprob_chunk_tokens
        self._checkpointed: list[nn.Module] = []  # modules whose activations are recomputed in backward

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each transformer layer's activations in the backward pass instead of keeping them
        (the HF model's activation/gradient checkpointing, non-reentrant), for the actor and a separate critic.

        HF checkpoints a layer only while it is in training mode; :meth:`evaluate` switches just the
        checkpointed modules into it for passes with gradients, so dropout stays as it was and
        generation keeps its KV cache. Same gradients as without it (tested)."""
        for model in (self.lm, self.critic_trunk):
            if model is None or any(m is model for m in self._checkpointed):
                continue
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 (the old name warns)
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            self._checkpointed += [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]

    @contextlib.contextmanager
    def _checkpointing(self):
        """Within the block the checkpointed modules (not their children) are in training mode, when gradients are on."""
        if not self._checkpointed or not torch.is_grad_enabled():
            yield
            return
        saved = [m.training for m in self._checkpointed]
        try:
            for m in self._checkpointed:
                m.training = True
            yield
        finally:
            for m, was in zip(self._checkpointed, saved):
                m.training = was

    # ------------------------------------------------------------------ parameters
    def actor_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.lm.parameters() if p.requires_grad]

    def critic_parameters(self) -> list[nn.Parameter]:
        params = list(self.value_head.parameters())
        if self.critic_trunk is not None:
            params += [p for p in self.critic_trunk.parameters() if p.requires_grad]
        return params

    @property
    def device(self) -> torch.device:
        return next(self.lm.parameters()).device

    # ------------------------------------------------------------------ forward
    def _autocast(self):
        if self.compute_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def _finish_logits(self, logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """float32, softcapped where the model does, undecodable ids masked, divided by temperature."""
        logits = logits.float()
        if self._softcap:
            logits = torch.tanh(logits / self._softcap) * self._softcap
        if self.vocab_limit is not None:
            undecodable = torch.arange(logits.shape[-1], device=logits.device) >= self.vocab_limit
            logits = logits.masked_fill(undecodable, float("-inf"))
        return logits / temperature if temperature not in (0, 1.0) else logits

    @property
    def actor_trunk(self) -> nn.Module:
        """The LM without its output layer (the module a shared value head reads)."""
        return self.lm.get_decoder() if hasattr(self.lm, "get_decoder") else self.lm.base_model

    def critic_from_actor(self) -> None:
        """Copy the actor's trunk into a separate critic (e.g. after SFT), so both start from the same weights."""
        if self.critic_trunk is not None:
            self.critic_trunk.load_state_dict(self.actor_trunk.state_dict())

    def _trunk(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # no KV cache in a scoring pass (nothing reads it; HF warns when checkpointing layers see one)
        return self.actor_trunk(input_ids=ids, use_cache=False, **trunk_inputs(attention_mask)).last_hidden_state

    def logits_from_hidden(self, hidden: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """``[..., H] -> [..., V]`` float32 logits as sampled (see :meth:`_finish_logits`)."""
        return self._finish_logits(self.lm.get_output_embeddings()(hidden), temperature)

    def evaluate(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor,
        *,
        temperature: float = 1.0,
        with_values: bool = True,
        with_entropy: bool = True,
        with_logp: bool = True,
    ) -> PolicyOutput:
        """Log-probs (and entropies) of ``ids`` at ``positions``, and values at every position.

        Args:
            ids: ``[B, L]`` token ids (right-padded).
            attention_mask: ``[B, L]`` 1 for real tokens.
            positions: ``[B, L]`` bool; where ``logp``/``entropy`` are wanted (never column 0).
            temperature: The sampling temperature the rollout used (the behaviour policy is
                ``softmax(logits / temperature)``).
            with_logp: ``False`` returns zero log-probs and entropies; with a separate critic
                the actor's forward pass is then skipped (values only).
        """
        with self._autocast(), self._checkpointing():
            return self._evaluate(ids, attention_mask, positions, temperature, with_values, with_entropy, with_logp)

    def _evaluate(
        self, ids, attention_mask, positions, temperature, with_values, with_entropy, with_logp=True
    ) -> PolicyOutput:
        B, L = ids.shape
        need_actor = with_logp or (with_values and self.critic_trunk is None)
        hidden = self._trunk(ids, attention_mask) if need_actor else None
        logp = torch.zeros(B, L, dtype=torch.float32, device=ids.device)
        entropy = torch.zeros(B, L, dtype=torch.float32, device=ids.device)
        sel = positions[:, 1:]
        if with_logp and sel.any():
            h = hidden[:, :-1][sel]  # [N, H]: the state before each selected token
            target = ids[:, 1:][sel]
            lp, ent = selected_logprobs(
                lambda x: self.logits_from_hidden(x, temperature),
                h,
                target,
                chunk_tokens=self.logprob_chunk_tokens,
                with_entropy=with_entropy,
            )
            logp = logp.masked_scatter(torch.nn.functional.pad(sel, (1, 0)), lp)
            if with_entropy:
                entropy = entropy.masked_scatter(torch.nn.functional.pad(sel, (1, 0)), ent)
        values = None
        if with_values:
            critic_hidden = hidden if self.critic_trunk is None else self._critic_hidden(ids, attention_mask)
            with torch.autocast(device_type=self.device.type, enabled=False):  # the value head stays float32
                values = self.value_head(critic_hidden.float()).squeeze(-1)
        return PolicyOutput(logp=logp, entropy=entropy, values=values)

    def _critic_hidden(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.critic_trunk(input_ids=ids, use_cache=False, **trunk_inputs(attention_mask)).last_hidden_state

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        stop_ids: frozenset[int],
        pad_id: int,
        generator: torch.Generator,
        temperature: float = 1.0,
        use_cache: bool = True,
        turn_cache: TurnCache | None = None,
        keys: list[int] | None = None,
        top_p: float = 1.0,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample one response per prompt, token by token, with a KV cache.

        Prompts are left-padded into one batch. A row stops at its first id in ``stop_ids``
        (kept in the response) or after ``max_new_tokens`` ids. ``temperature = 0`` is greedy.
        Returns the sampled ids and their log-probabilities under the sampling distribution.

        ``top_p < 1`` samples from the smallest set of tokens whose probability reaches ``top_p`` (nucleus sampling;
        the log-probabilities are then those of that renormalised set).

        Sampling happens on the model's device with :func:`sampling_generator` (``generator`` itself
        on CPU); per token only one bool (are all rows done?) reaches the host, and the ids and
        log-probs are copied once at the end. ``use_cache=False`` recomputes the whole prefix at
        every step (slow; the reference the cached path is tested against). With ``turn_cache`` (a
        :class:`TurnCache`) and ``keys`` (one per prompt, e.g. the episode's index), the keys and
        values of what an earlier call held for a prompt's key are reused and left in the cache for the next turn.
        """
        device = self.device
        n = len(prompts)
        if turn_cache is not None and (keys is None or len(keys) != n):
            raise ValueError("generate: turn_cache needs one key per prompt.")
        reuse = turn_cache is not None and use_cache and self._layered_cache
        held = [turn_cache.cached_prefix(k, p) for k, p in zip(keys, prompts)] if reuse else [0] * n
        past = max(held) if held else 0
        new_parts = [p[c:] for p, c in zip(prompts, held)]  # what runs through the model now
        width = max(len(p) for p in new_parts)
        ids = torch.full((n, width), pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        position_ids = torch.zeros((n, width), dtype=torch.long)
        for i, (p, c) in enumerate(zip(new_parts, held)):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
            position_ids[i, width - len(p) :] = torch.arange(c, c + len(p))
        ids, mask, position_ids = ids.to(device), mask.to(device), position_ids.to(device)
        cache = None
        if use_cache:
            cache = _kv_cache(self.lm.config, past + width + max_new_tokens)
        if past:  # the rows' held positions, left-padded, ahead of the new tokens
            rows = [turn_cache.rows[k] if c else -1 for k, c in zip(keys, held)]
            past_keys, past_values, past_mask = turn_cache.gather(rows, held)
            for layer, k, v in zip(cache.layers, past_keys, past_values):
                layer.update(k, v)
            mask = torch.cat([past_mask, mask], dim=1)
        start_mask = mask
        sampler = sampling_generator(generator, device) if temperature != 0 else None
        stops = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)
        tokens: list[torch.Tensor] = []  # [n] per step, on the device
        lps: list[torch.Tensor] = []
        done = torch.zeros(n, dtype=torch.bool, device=device)
        step_ids, step_pos = ids, position_ids
        for _ in range(max_new_tokens):
            with self._autocast():
                if use_cache:
                    out = self.lm(
                        input_ids=step_ids,
                        attention_mask=mask,
                        position_ids=step_pos,
                        use_cache=True,
                        logits_to_keep=1,
                        **{self._cache_kw: cache},
                    )
                else:
                    out = self.lm(
                        input_ids=ids,
                        attention_mask=mask,
                        position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                        use_cache=False,
                        logits_to_keep=1,
                    )
            logits = self._finish_logits(out.logits[:, -1], temperature)
            if temperature != 0 and top_p < 1.0:
                logits = nucleus_logits(logits, top_p)
            logprobs = torch.log_softmax(logits, -1)
            if temperature == 0:
                token = logits.argmax(-1)
            else:
                token = torch.multinomial(logprobs.exp(), 1, generator=sampler).squeeze(-1)
            tokens.append(token)
            lps.append(logprobs.gather(-1, token[:, None]).squeeze(-1))
            done |= torch.isin(token, stops)
            if bool(done.all()):
                break
            step_ids = token[:, None]
            step_pos = step_pos[:, -1:] + 1
            mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
            if not use_cache:
                ids = torch.cat([ids, step_ids], dim=1)
        all_ids = torch.stack(tokens, 1).cpu().tolist() if tokens else [[] for _ in range(n)]
        all_lp = torch.stack(lps, 1).cpu().tolist() if lps else [[] for _ in range(n)]
        out_ids: list[list[int]] = []
        out_lp: list[list[float]] = []
        for row_ids, row_lp in zip(all_ids, all_lp):
            end = next(
                (j + 1 for j, t in enumerate(row_ids) if t in stop_ids), len(row_ids)
            )  # the first stop id is kept
            out_ids.append(row_ids[:end])
            out_lp.append(row_lp[:end])
        if reuse:
            self._keep_turn(turn_cache, cache, keys, prompts, out_ids, start_mask, len(tokens))
        return out_ids, out_lp

    @functools.cached_property
    def _layered_cache(self) -> bool:
        """Whether this model's KV cache is made of plain layers, whose kept positions a :class:`TurnCache` can gather
        (not sliding windows, not a transformers without cache layers)."""
        layer_class = _preallocated_layer()
        layers = getattr(_kv_cache(self.lm.config, 1), "layers", None)
        return layer_class is not None and bool(layers) and all(isinstance(layer, layer_class) for layer in layers)

    @staticmethod
    def _keep_turn(
        turn_cache: TurnCache,
        cache: Any,
        keys: list[int],
        prompts: list[list[int]],
        responses: list[list[int]],
        start_mask: torch.Tensor,
        steps: int,
    ) -> None:
        """Leave this call's keys and values in ``turn_cache``: each row holds its prompt and the sampled tokens that
        ran through the model (all but the last step's; none after the row's stop id)."""
        fed = max(steps - 1, 0)
        kept = [min(len(r), fed) for r in responses]
        mask = torch.zeros((len(prompts), start_mask.shape[1] + fed), dtype=torch.long, device=start_mask.device)
        mask[:, : start_mask.shape[1]] = start_mask
        for i, c in enumerate(kept):
            mask[i, start_mask.shape[1] : start_mask.shape[1] + c] = 1
        turn_cache.keys = [layer.keys[..., : mask.shape[1], :] for layer in cache.layers]
        turn_cache.values = [layer.values[..., : mask.shape[1], :] for layer in cache.layers]
        turn_cache.mask = mask
        turn_cache.rows = {k: i for i, k in enumerate(keys)}
        turn_cache.tokens = {k: list(p) + r[:c] for k, p, r, c in zip(keys, prompts, responses, kept)}


# ---------------------------------------------------------------------- loading and saving
def load_policy(
    path: str | os.PathLike,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    critic: str = "shared",
    critic_path: str | os.PathLike | None = None,
) -> tuple[Policy, Any]:
    """Load a policy and its tokenizer from a local checkpoint directory (no downloads).

    ``path`` is any directory ``AutoModelForCausalLM.from_pretrained`` reads (with a tokenizer
    that has a chat template), or one written by :func:`save_policy` (then the value head and
    a separate critic are restored too). ``critic="separate"`` adds a critic trunk loaded from
    ``critic_path`` (default: ``path``). ``dtype="auto"`` computes in bfloat16 on CUDA and float32
    elsewhere (:func:`resolve_dtype`).
    """
    from transformers import AutoModel, AutoModelForCausalLM

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is not a model directory (no config.json). Pass --model tiny, or a local "
            "directory written by save_pretrained (this trainer never downloads models)."
        )
    dtype = resolve_dtype(
        dtype, device, bf16_supported=torch.device(device).type == "cuda" and torch.cuda.is_bf16_supported()
    )
    check_json_files(path)
    meta = json.loads((path / _POLICY_META).read_text()) if (path / _POLICY_META).exists() else {}
    lm = _from_pretrained(AutoModelForCausalLM, path)
    tokenizer = load_tokenizer(path)
    critic_trunk = None
    if critic == "separate" or meta.get("critic") == "separate":
        cpath = path / _CRITIC_DIR if (path / _CRITIC_DIR).exists() else Path(critic_path or path)
        check_json_files(cpath)
        critic_trunk = _from_pretrained(AutoModel, cpath)
    elif critic != "shared":
        raise ValueError(f"critic must be 'shared' or 'separate', got {critic!r}.")
    policy = Policy(lm, critic_trunk, compute_dtype=DTYPES[dtype], vocab_limit=len(tokenizer))
    if (path / _VALUE_HEAD_FILE).exists():
        policy.value_head.load_state_dict(safe_torch_load(path / _VALUE_HEAD_FILE))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return policy.to(device), tokenizer


def safe_torch_load(file: str | os.PathLike) -> Any:
    """``torch.load(file, weights_only=True)`` whose refusals name ``file`` and say what to do: a pickle with
    Python objects (which could run code) and a truncated or corrupt file are ValueErrors."""
    check_regular_file(file)
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's own message advises loading with weights_only=False: only the line naming what was refused is kept
        what = next((line.strip() for line in str(e).splitlines() if "Unsupported" in line or "GLOBAL" in line), "")
        raise ModelFileError(
            f"{file}: refused to load: it holds Python objects other than tensors and plain containers, and "
            "unpickling them could run code. A checkpoint saved by this trainer never does; do not resume from files "
            f"of unknown origin.{' (' + what + ')' if what else ''}"
        ) from None
    except (EOFError, RuntimeError, OSError, ValueError) as e:
        raise ModelFileError(
            f"{file}: not a whole checkpoint written by this trainer (truncated or corrupt: {type(e).__name__}). "
            "Load a directory a run wrote."
        ) from None


def load_tokenizer(path: str | os.PathLike) -> Any:
    """The tokenizer of a checkpoint directory, exactly as its ``tokenizer.json`` defines it.

    ``AutoTokenizer`` may rebuild the pipeline from the model type instead (transformers 5 gives
    any ``qwen2`` checkpoint Qwen2's own pre-tokenizer regex), which would silently change the
    tokenisation of a tokenizer trained with another one, such as the tiny model's. Directories
    without ``tokenizer.json`` (SentencePiece-only) go through ``AutoTokenizer``.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(path)
    check_json_files(path)
    if (path / "tokenizer.json").exists():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    check_template_renders(tokenizer, path)
    return tokenizer


def _from_pretrained(cls: Any, path: Path) -> nn.Module:
    """float32 weights from a local directory (``dtype=`` in recent transformers, ``torch_dtype=`` before). A
    pickled weights file (``pytorch_model.bin``) is read with ``weights_only`` by transformers; its refusal, or a
    weights file that is not a regular file, is one ``ValueError`` naming the file."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (path / name).exists() or (path / name).is_symlink():
            check_regular_file(path / name)
    try:
        try:
            return cls.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        except TypeError:
            return cls.from_pretrained(path, local_files_only=True, torch_dtype=torch.float32)
    except (pickle.UnpicklingError, OSError, RuntimeError, ValueError) as e:
        text = str(e)
        if (path / "pytorch_model.bin").exists() and ("weights_only" in text or isinstance(e, pickle.UnpicklingError)):
            raise ModelFileError(
                f"{path / 'pytorch_model.bin'}: refused to load: it holds Python objects other than tensors, and "
                "unpickling them could run code. Use the model's own weights (safetensors where it has them)."
            ) from None
        raise


def save_policy(policy: Policy, tokenizer: Any, path: str | os.PathLike) -> Path:
    """Write a directory that :func:`load_policy` (and ``from_pretrained``) reads.

    The files are written into a sibling folder first and moved into place when complete, so a
    run killed while saving never leaves a half-written policy at ``path`` (an older one there is
    replaced only then)."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.writing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    policy.lm.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save(policy.value_head.state_dict(), tmp / _VALUE_HEAD_FILE)
    if policy.critic_trunk is not None:
        policy.critic_trunk.save_pretrained(tmp / _CRITIC_DIR)
    (tmp / _POLICY_META).write_text(json.dumps({"critic": "separate" if policy.critic_trunk is not None else "shared"}))
    old = path.parent / f".{path.name}.old-{os.getpid()}"
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return path
