"""The tiny model's architecture and tokenizer, built offline from the text an env produces.

``build_tiny(env_id, directory)`` writes an ordinary Hugging Face checkpoint directory
(``config.json``, ``model.safetensors``, ``tokenizer.json``, chat template) that
``reference_trainer.policy.load_policy`` loads exactly like a downloaded model, so the tiny
model and a user's ``--model PATH`` share one code path. Nothing is downloaded:

* the tokenizer is a byte-level BPE (any string encodes, and decoding is exact) trained with
  `tokenizers` on observations and responses of the env, played by its expert and by a few
  malformed actions. A pre-tokenizer isolates every grid symbol, digit and whitespace
  character, so a Sokoban board costs one token per cell and ``Up`` / ``Left`` are one token
  each;
* the model is a Qwen2-style config (RMSNorm, rotary positions, SwiGLU, tied embeddings) with
  random weights drawn from ``seed``.

The same ``(env_id, env_kwargs, seed, sizes)`` always gives byte-identical files, and a
finished build is reused from ``cache_dir`` (keyed by a SHA-256 of the corpus and the sizes).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

#: Padding, start-of-message and end-of-message tokens (ChatML, as Qwen2 uses).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: ChatML: ``<|im_start|>{role}\n{content}<|im_end|>\n`` per message.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
#: Pieces BPE may merge within (never across): tags, ``||`` separators, words (``Up``,
#: `` box``), then single digits, whitespace characters and symbols, so every grid cell stays
#: its own token.
PRETOKENIZER_PATTERN = r"</?[A-Za-z]+>| ?\|\|| ?[A-Za-z][a-z]*| ?[0-9]|\s|[^\sA-Za-z0-9]"
_BUILD_VERSION = 2  # bump when the construction changes, to invalidate caches


@dataclass(frozen=True)
class TinySpec:
    """Sizes of the tiny model (about 160k parameters by default)."""

    arch: str = "qwen2"  # "qwen2" (rotary positions) or "gpt2" (learned absolute positions)
    vocab_size: int = 512  # BPE vocabulary target, special tokens included
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 256
    max_positions: int = 1024
    rope_theta: float = 10_000.0
    init_std: float = 0.1  # std of the random initial weights (HF default 0.02 leaves a tiny model on a long plateau)
    corpus_episodes: int = 64  # env episodes played to collect tokenizer text


def corpus_seeds(seed: int, episodes: int) -> list[int]:
    """The reset seeds of a tokenizer corpus (:func:`env_corpus`)."""
    return list(range(int(seed), int(seed) + int(episodes)))


def default_cache_dir() -> Path:
    """``$AGENTGYM_TURN_CACHE`` or ``~/.cache/agentgym-turn``, plus ``/tiny``."""
    root = os.environ.get("AGENTGYM_TURN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "agentgym-turn")
    return Path(root) / "tiny"


def env_corpus(env_id: str, episodes: int = 64, seed: int = 0, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Texts an env produces: first messages, later observations and expert responses.

    Every third turn sends a malformed response instead of the expert's, so the invalid-action
    messages are in the corpus too. Seeds ``seed .. seed + episodes - 1``.
    """
    import gymnasium as gym

    env = gym.make(env_id, **(env_kwargs or {}))
    texts: list[str] = ["system", "user", "assistant"]
    malformed = ("I am not sure.", "<answer></answer>", "move up")
    try:
        for i, reset_seed in enumerate(corpus_seeds(seed, episodes)):
            observation, _ = env.reset(seed=reset_seed)
            texts.append(observation)
            for turn in range(env.spec.max_episode_steps or 16):
                if turn % 3 == 2:
                    response = malformed[(i + turn) % len(malformed)]
                else:
                    response = env.unwrapped.expert_action()
                texts.append(response)
                observation, _, terminated, truncated, _ = env.step(response)
                texts.append(observation)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return texts


def train_tokenizer(texts: Iterable[str], vocab_size: int = 512, pattern: str = PRETOKENIZER_PATTERN) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML special tokens and template; ``pattern`` is the
    pre-tokenizer's split regex."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def _model_config(spec: TinySpec, vocab_size: int, tokenizer: Any) -> Any:
    special = dict(bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    if spec.arch == "gpt2":
        from transformers import GPT2Config

        # activation "gelu": PyTorch's fused erf GELU (GPT-2's tanh "gelu_new" costs a third of a CPU step)
        return GPT2Config(
            vocab_size=vocab_size,
            n_embd=spec.hidden_size,
            n_layer=spec.num_layers,
            n_head=spec.num_heads,
            n_inner=spec.intermediate_size,
            n_positions=spec.max_positions,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            initializer_range=spec.init_std,
            activation_function="gelu",
            tie_word_embeddings=True,
            **special,
        )
    if spec.arch == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(
            vocab_size=vocab_size,
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_layers,
            num_attention_heads=spec.num_heads,
            num_key_value_heads=spec.num_heads,
            max_position_embeddings=spec.max_positions,
            rope_theta=spec.rope_theta,
            initializer_range=spec.init_std,
            tie_word_embeddings=True,
            **special,
        )
    raise ValueError(f"arch must be 'gpt2' or 'qwen2', got {spec.arch!r}.")


def _cache_key(texts: Sequence[str], spec: TinySpec, seed: int) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"spec": asdict(spec), "seed": seed, "v": _BUILD_VERSION}, sort_keys=True).encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_tiny(
    env_ids: str | Sequence[str],
    directory: str | os.PathLike | None = None,
    *,
    seed: int = 0,
    spec: TinySpec = TinySpec(),
    env_kwargs: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Build (or reuse) a tiny checkpoint directory for ``env_ids``; return its path.

    Args:
        env_ids: The env id(s) whose text trains the tokenizer.
        directory: Where to write; default ``cache_dir/<key>`` (reused when complete).
        seed: Seeds both the corpus episodes and the weight initialisation.
        spec: Model and tokenizer sizes.
        env_kwargs: Passed to ``gymnasium.make`` when collecting the corpus (e.g. a prompt style).
        cache_dir: Default :func:`default_cache_dir`.
    """
    import torch
    from transformers import AutoModelForCausalLM

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    texts: list[str] = []
    for env_id in ids:
        texts += env_corpus(env_id, spec.corpus_episodes, seed=seed, env_kwargs=env_kwargs)
    key = _cache_key(texts, spec, seed)
    out = Path(directory) if directory is not None else Path(cache_dir or default_cache_dir()) / key
    stamp = out / "tiny_build.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("key") == key:
        return out

    tokenizer = train_tokenizer(texts, spec.vocab_size)
    config = _model_config(spec, len(tokenizer), tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    return publish_build(out, model, tokenizer, {"key": key, "env_ids": ids, "seed": seed, "spec": asdict(spec)})


def publish_build(out: Path, model: Any, tokenizer: Any, stamp: dict[str, Any]) -> Path:
    """Write ``model``, ``tokenizer`` and ``tiny_build.json`` (``stamp``, with the cache ``key``) into a
    sibling temporary directory, then move it to ``out`` whole, so that a reader never sees a half-written
    build (file by file when ``out`` exists: an older build, or a concurrent one that won the race)."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "tiny_build.json").write_text(json.dumps(stamp, indent=1))
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():  # an older build or a concurrent one: replace file by file
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
        tmp.rmdir()
    else:
        try:
            os.replace(tmp, out)
        except OSError:  # another process won the race
            for f in tmp.iterdir():
                os.replace(f, out / f.name)
            tmp.rmdir()
    return out
