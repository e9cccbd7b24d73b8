"""Copy pretraining of the tiny model (``reference_trainer/tiny/pretrain.py``): the seeded induction
circuit copies before any training, the previous-token head's scores peak where they should,
and a pretrained build is an ordinary, cached checkpoint directory."""

import json

import numpy as np
import pytest
import torch

import agentgym_turn  # noqa: F401  (registers the ids)
from reference_trainer.tiny.pretrain import (
    PretrainSpec,
    build_pretrained_tiny,
    pretrain_weights,
    previous_token_bias,
    seed_induction_heads,
    weighted_next_token_loss,
    world_episodes,
)


def _qwen2(vocab: int = 2048, rope_theta: float = 1e6):
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        rope_theta=rope_theta,
        initializer_range=0.1,
        tie_word_embeddings=True,
    )
    return AutoModelForCausalLM.from_config(cfg).eval()


def _copy_accuracy(lm, vocab: int = 2048, half: int = 24, batch: int = 16) -> float:
    """Greedy next-token accuracy on the second copy of a random token sequence (its first token left out)."""
    rng = np.random.default_rng(1)
    first = torch.tensor(rng.integers(0, vocab, size=(batch, half)))
    ids = torch.cat([first, first], dim=1)
    with torch.no_grad():
        pred = lm(input_ids=ids).logits.argmax(-1)
    return float((pred[:, half:-1] == ids[:, half + 1 :]).float().mean())


@pytest.mark.parametrize("margin", [4.0, 8.0])
def test_previous_token_head_scores_peak_at_the_previous_position_by_the_margin(margin):
    inv_freq = (1.0 / (1e6 ** (np.arange(0, 16, 2) / 16))).tolist()
    q, k = previous_token_bias(inv_freq, range(4), head_dim=16, max_positions=1024, margin=margin)
    half = 8
    qc = np.array(q[:half]) + 1j * np.array(q[half:])
    kc = np.array(k[:half]) + 1j * np.array(k[half:])
    dist = np.arange(1024)
    # rotary scores depend on the distance only: Re(q conj(k) e^{i d theta}) / sqrt(head_dim)
    scores = np.real(np.exp(1j * np.outer(dist, inv_freq)) @ (qc * np.conj(kc))) / 4.0
    assert int(np.argmax(scores)) == 1
    assert np.delete(scores, 1).max() <= scores[1] - margin + 1e-9


def test_the_seeded_circuit_copies_a_repeated_sequence_before_any_training():
    plain = _qwen2()
    seeded = _qwen2()
    seed_induction_heads(seeded)
    assert _copy_accuracy(plain) < 0.05
    assert _copy_accuracy(seeded) > 0.5  # measured 0.6-0.7 on coined names; untrained weights copy nothing


def test_seeding_refuses_a_model_without_room_for_the_circuit_by_name():
    lm = _qwen2()
    with pytest.raises(ValueError, match="seed_induction_heads"):
        seed_induction_heads(lm, heads=3)  # 2 * 3 * 16 > 64 dimensions


def test_pretrain_spec_reads_a_dict_or_json_and_names_unknown_fields():
    assert PretrainSpec.from_config({"steps": 3, "worlds": [5, 6]}) == PretrainSpec(steps=3, worlds=(5, 6))
    assert PretrainSpec.from_config('{"steps": 3}') == PretrainSpec(steps=3)
    with pytest.raises(TypeError, match="stepz"):
        PretrainSpec.from_config({"stepz": 3})


def test_a_pretrained_build_is_a_loadable_checkpoint_reused_from_its_cache(tmp_path):
    from reference_trainer.policy import load_policy
    from reference_trainer.tiny import TinySpec

    tiny = TinySpec(vocab_size=300, rope_theta=1e6)
    spec = PretrainSpec(
        worlds=(1000, 1001), world_scale=0.1, episodes_per_world=4, corpus_episodes_per_world=4, steps=2, batch_size=4
    )
    kwargs = {"topk": 1, "max_searches": 2, "passage_sentences": 3, "expert_think": False}
    path = build_pretrained_tiny("TurnSearchQA-v0", kwargs, tiny=tiny, spec=spec, cache_dir=tmp_path)
    meta = json.loads((path / "tiny_build.json").read_text())
    assert meta["episodes"] == 8 and meta["pretrain"]["steps"] == 2
    stamp = (path / "tiny_build.json").stat().st_mtime_ns
    assert build_pretrained_tiny("TurnSearchQA-v0", kwargs, tiny=tiny, spec=spec, cache_dir=tmp_path) == path
    assert (path / "tiny_build.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    policy, tokenizer = load_policy(path)
    assert tokenizer.chat_template and len(tokenizer) <= 300


def test_zero_steps__builds_the_tokenizer_of_many_worlds_and_the_seeded_circuit_only(tmp_path):
    from reference_trainer.policy import load_policy
    from reference_trainer.tiny import TinySpec

    spec = PretrainSpec(
        worlds=(1000, 1001), world_option="catalog_seed", scale_option=None, corpus_episodes_per_world=4, steps=0
    )
    path = build_pretrained_tiny(
        "TurnWebShop-v0",
        {"observation_style": "compact", "results_per_page": 3},
        tiny=TinySpec(vocab_size=300, rope_theta=1e6),
        spec=spec,
        cache_dir=tmp_path,
    )
    meta = json.loads((path / "tiny_build.json").read_text())
    assert meta["episodes"] == 0 and meta["tokens"] == 0 and meta["loss_first"] is None
    policy, tokenizer = load_policy(path)
    assert len(tokenizer) <= 300  # a BPE learnt from the WebShop catalogs' text: its words are merged, not spelled
    assert len(tokenizer("click[buy now]", add_special_tokens=False)["input_ids"]) < len("click[buy now]")


def test_world_option__each_world_is_a_webshop_catalog():
    """``world_option``/``scale_option`` name the env's own world options: WebShop's ``catalog_seed``, no scale."""
    from reference_trainer.tiny.pretrain import world_kwargs

    spec = PretrainSpec(worlds=(1000, 1001), world_option="catalog_seed", scale_option=None, episodes_per_world=2)
    assert world_kwargs({"results_per_page": 3}, 1000, spec) == {"results_per_page": 3, "catalog_seed": 1000}
    assert world_kwargs(None, 7, PretrainSpec(world_scale=0.5)) == {"world_seed": 7, "world_scale": 0.5}
    from reference_trainer.tiny import train_tokenizer
    from agentgym_turn.tokens import ChatFormat

    kwargs = {"observation_style": "compact", "results_per_page": 3}
    fmt = ChatFormat(train_tokenizer(["search click buy now results instruction price"] * 8, 300))
    episodes = world_episodes("TurnWebShop-v0", kwargs, spec, fmt)
    assert len(episodes) == 4 and all(e.success for e in episodes)
    assert len({tuple(e.conversation.ids) for e in episodes}) == 4  # other catalogs, other goals


def test_weighted_next_token_loss__hand_computed():
    """docs/algorithms.md, "Copy pretraining": one sequence [a, b, pad], b a response token weighted 4, vocabulary 2."""
    ids = torch.tensor([[0, 1, 0]])
    attention = torch.tensor([[1, 1, 0]])
    action = torch.tensor([[0, 1, 0]])
    w = pretrain_weights(attention, action, 4.0)
    assert w.tolist() == [[1.0, 4.0, 0.0]]
    # logits at position 0 predict token 1 (b): p(b) = e^2 / (e^0 + e^2); position 1 predicts the padding (weight 0)
    logits = torch.tensor([[[0.0, 2.0], [5.0, -5.0], [0.0, 0.0]]])
    expected = -np.log(np.exp(2.0) / (1.0 + np.exp(2.0)))  # (4 * nll_b + 0 * anything) / 4
    assert float(weighted_next_token_loss(logits, ids, w)) == pytest.approx(expected, rel=1e-6)
    # two predicted tokens, weights 1 and 4: the weighted mean
    ids2, w2 = torch.tensor([[0, 1, 0]]), torch.tensor([[1.0, 1.0, 4.0]])
    logits2 = torch.tensor([[[0.0, 2.0], [3.0, 0.0], [0.0, 0.0]]])
    nll_1 = -np.log(np.exp(2.0) / (1.0 + np.exp(2.0)))
    nll_2 = -np.log(np.exp(3.0) / (np.exp(3.0) + 1.0))
    assert float(weighted_next_token_loss(logits2, ids2, w2)) == pytest.approx((1 * nll_1 + 4 * nll_2) / 5, rel=1e-6)
