"""Small randomly initialised causal LMs (Qwen2 or GPT-2 layout) for the policy's numerical tests."""

import torch


def random_lm(arch: str = "qwen2", vocab: int = 300, seed: int = 0, init_std: float = 0.02):
    from transformers import AutoModelForCausalLM, GPT2Config, Qwen2Config

    torch.manual_seed(seed)
    if arch == "gpt2":
        config = GPT2Config(
            n_embd=32,
            n_layer=2,
            n_head=4,
            vocab_size=vocab,
            n_positions=256,
            initializer_range=init_std,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=0,
            eos_token_id=0,
        )
    else:
        config = Qwen2Config(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=vocab,
            max_position_embeddings=256,
            initializer_range=init_std,
        )
    return AutoModelForCausalLM.from_config(config).eval()
