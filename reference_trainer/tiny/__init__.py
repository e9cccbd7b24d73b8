"""The tiny model: a small causal LM and its byte-level BPE tokenizer, built offline from an env's text.

* :mod:`.model`: the architecture (:class:`TinySpec`), the tokenizer corpus and :func:`build_tiny`;
* :mod:`.pretrain`: optional copy pretraining on expert episodes of many worlds (:class:`PretrainSpec`).

A run configures it with one object, :class:`reference_trainer.config.TinyConfig`
(``cfg.model.tiny``, the ``--tiny-*`` options), which :func:`build` turns into a checkpoint
directory that :func:`reference_trainer.policy.load_policy` reads like any downloaded model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import (
    CHAT_TEMPLATE,
    PRETOKENIZER_PATTERN,
    SPECIAL_TOKENS,
    TinySpec,
    build_tiny,
    corpus_seeds,
    default_cache_dir,
    env_corpus,
    publish_build,
    train_tokenizer,
)
from .pretrain import PretrainSpec, build_pretrained_tiny, pretrain_world_seeds, world_kwargs

__all__ = [
    "CHAT_TEMPLATE",
    "PRETOKENIZER_PATTERN",
    "SPECIAL_TOKENS",
    "PretrainSpec",
    "TinySpec",
    "build",
    "build_pretrained_tiny",
    "build_tiny",
    "corpus_seeds",
    "default_cache_dir",
    "env_corpus",
    "pretrain_world_seeds",
    "publish_build",
    "spec_of",
    "train_tokenizer",
    "world_kwargs",
]


def spec_of(tiny: Any) -> TinySpec:
    """The :class:`TinySpec` of a :class:`~reference_trainer.config.TinyConfig` (the MLP is 4x the hidden size)."""
    return TinySpec(
        arch=tiny.arch,
        vocab_size=tiny.vocab,
        hidden_size=tiny.hidden,
        num_layers=tiny.layers,
        num_heads=tiny.heads,
        intermediate_size=4 * tiny.hidden,
        rope_theta=tiny.rope_theta,
        init_std=tiny.init_std,
    )


def build(tiny: Any, env_id: str, env_kwargs: dict[str, Any] | None) -> Path:
    """Build (or reuse from the cache) the tiny model ``tiny`` (a ``TinyConfig``) for ``env_id``; its tokenizer
    corpus and pretraining episodes are expert play with ``env_kwargs``."""
    if tiny.pretrain:
        return build_pretrained_tiny(
            env_id,
            env_kwargs,
            tiny=spec_of(tiny),
            spec=PretrainSpec.from_config(tiny.pretrain),
            seed=tiny.seed,
            directory=tiny.dir,
        )
    return build_tiny(env_id, tiny.dir, seed=tiny.seed, spec=spec_of(tiny), env_kwargs=env_kwargs)
