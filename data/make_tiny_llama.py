#!/usr/bin/env python3
"""Make data/tiny_llama/: a tiny trained Llama (Hugging Face layout) and greedy-decoding references.

lumen's `generate` command (issue 27) loads a Llama checkpoint directory (config.json +
model.safetensors), decodes greedily with a KV cache, and is checked against the tokens and
logits that transformers' own `generate` produced here.

How to run it (from the repository root; training takes about 40 s on one CPU thread):

    python3 -m pip install torch==2.15.0 transformers==5.23.0 safetensors==0.8.0 numpy==2.4.6
    python3 data/make_tiny_llama.py            # writes data/tiny_llama/{config.json,
                                               #   generation_config.json, model.safetensors,
                                               #   reference.safetensors}

Made with torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, numpy 2.4.6 (Python 3.11).

Model: transformers.LlamaForCausalLM in float32, seeded (SEED below):
    vocab_size 96, hidden_size 64, intermediate_size 160, num_hidden_layers 2,
    num_attention_heads 4, num_key_value_heads 2 (grouped-query attention: head_dim 16,
    2 query heads per kv head), max_position_embeddings 48, rope_theta 5000.0 (not the
    default 10000, on purpose: a reader must take it from config.json, where transformers 5
    writes it as "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"}),
    rms_norm_eps 1e-5, hidden_act "silu", tie_word_embeddings false (lm_head.weight is its own
    tensor), attention_bias false, mlp_bias false, no rope scaling, no bos/eos/pad token.
    model.safetensors holds 21 f32 tensors in PyTorch's nn.Linear layout [out, in]
    (y = x @ W^T): model.embed_tokens.weight [96, 64], per layer model.layers.{0,1}.
    input_layernorm.weight [64], self_attn.{q_proj [64, 64], k_proj [32, 64], v_proj [32, 64],
    o_proj [64, 64]}.weight, post_attention_layernorm.weight [64], mlp.{gate_proj [160, 64],
    up_proj [160, 64], down_proj [64, 160]}.weight, then model.norm.weight [64] and
    lm_head.weight [96, 64].

Training (so that greedy argmax has clear margins, and so that attention matters): sequences of
48 tokens made of a random pattern of period p (1..8, tokens uniform in 0..95) repeated, so the
next token is the one p positions back; loss on every position after the first period. AdamW
(one-cycle learning rate, peak LR), STEPS steps of batch BATCH, single-threaded and
deterministic (final training loss about 1.1: the model copies patterns only partly, which is
enough for clear argmax margins; the minimum margin was 0.037).

References (data/tiny_llama/reference.safetensors), from
`model.generate(prompt, do_sample=False, max_new_tokens=N, output_logits=True,
return_dict_in_generate=True, use_cache=True, eos_token_id=None)` (transformers' own
DynamicCache decode, the model in its default attention implementation), for 4 prompts:
    p{i}.prompt  int64 [L_i]        the prompt
    p{i}.tokens  int64 [N_i]        the new tokens only (greedy argmax)
    p{i}.logits  float32 [N_i, 96]  the logits that chose each new token (generate's `logits`)
with (L, N) = (1, 10), (5, 10), (12, 12), (16, 32); the last prompt has L + N == 48 ==
max_position_embeddings, so decoding feeds positions 0..46 and the cache holds 47 entries when
the last token is chosen. Metadata: prompts = "4", made_by, transformers, torch, and
min_margin (the smallest top-1 minus top-2 logit gap over all 64 reference steps).

The script also checks that a full-sequence forward without cache gives the same argmax at every
step (and prints the largest logit difference from the cached decode).

Rerunning with the versions above reproduces model.safetensors byte for byte and
reference.safetensors tensor for tensor (safetensors writes the metadata keys in hash order,
so that file's header may come out permuted).
"""

import json
import os
import sys
import time

import numpy as np
import safetensors
import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 0
STEPS = 700
BATCH = 32
SEQ = 48
VOCAB = 96
LR = 1e-2
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_llama")
PROMPTS = [
    ([7], 10),
    ([3, 14, 15, 92, 65], 10),
    ([10, 20, 30, 40, 10, 20, 30, 40, 10, 20, 30, 40], 12),
    ([5, 81, 33, 5, 81, 33, 5, 81, 60, 2, 77, 60, 2, 77, 60, 2], 32),
]
MIN_MARGIN = 1e-3


def make_config():
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        hidden_act="silu",
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        torch_dtype="float32",
    )


def batch(gen):
    """BATCH sequences of SEQ tokens: a random pattern of period p (1..8) repeated."""
    x = torch.empty(BATCH, SEQ, dtype=torch.long)
    mask = torch.zeros(BATCH, SEQ - 1, dtype=torch.bool)
    for b in range(BATCH):
        p = int(torch.randint(1, 9, (1,), generator=gen))
        pat = torch.randint(0, VOCAB, (p,), generator=gen)
        x[b] = pat.repeat(SEQ // p + 1)[:SEQ]
        mask[b, p - 1 :] = True  # targets x[p:] are predictable from what came before
    return x, mask


def train(model):
    gen = torch.Generator().manual_seed(SEED + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS, pct_start=0.1)
    model.train()
    t0 = time.time()
    for step in range(STEPS):
        x, mask = batch(gen)
        logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits[mask], x[:, 1:][mask])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step:4d} loss {loss.item():.4f} ({time.time() - t0:.1f} s)", flush=True)
    model.eval()
    return time.time() - t0


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(make_config()).float()
    train_s = train(model)

    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)
    # Reload from disk so the references come from exactly the saved weights and config.
    model = LlamaForCausalLM.from_pretrained(OUT, dtype=torch.float32).eval()
    cfg = json.load(open(os.path.join(OUT, "config.json")))
    assert cfg["rope_parameters"]["rope_theta"] == 5000.0, cfg

    tensors = {}
    margins = []
    worst_diff = 0.0
    for i, (prompt, n) in enumerate(PROMPTS):
        assert len(prompt) + n <= SEQ
        ids = torch.tensor([prompt], dtype=torch.long)
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=n,
                min_new_tokens=n,
                output_logits=True,
                return_dict_in_generate=True,
                use_cache=True,
                eos_token_id=None,
                pad_token_id=0,
            )
        new = out.sequences[0, len(prompt) :]
        logits = torch.stack(out.logits, dim=1)[0].float()  # [N, vocab]
        assert new.shape == (n,), new.shape
        assert torch.equal(logits.argmax(-1), new)
        top2 = logits.topk(2, dim=-1).values
        margins.append((top2[:, 0] - top2[:, 1]).min().item())
        # Cross-check against one full forward pass over prompt + new tokens (no cache).
        with torch.no_grad():
            full = model(input_ids=out.sequences, use_cache=False).logits[0, len(prompt) - 1 : -1]
        assert torch.equal(full.argmax(-1), new), f"prompt {i}: cached and uncached argmax differ"
        worst_diff = max(worst_diff, (full - logits).abs().max().item())
        tensors[f"p{i}.prompt"] = torch.tensor(prompt, dtype=torch.int64)
        tensors[f"p{i}.tokens"] = new.to(torch.int64).contiguous()
        tensors[f"p{i}.logits"] = logits.contiguous()
        print(f"p{i}: prompt {prompt} -> {new.tolist()} (min margin {margins[-1]:.4f})")

    min_margin = min(margins)
    print(f"training took {train_s:.1f} s; minimum top-1 minus top-2 margin {min_margin:.4f}")
    print(f"cached vs uncached logits: max abs difference {worst_diff:.2e}")
    if min_margin <= MIN_MARGIN:
        sys.exit(f"minimum margin {min_margin} <= {MIN_MARGIN}: change SEED and rerun")
    meta = {
        "prompts": str(len(PROMPTS)),
        "made_by": "data/make_tiny_llama.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "min_margin": f"{min_margin:.6f}",
        "attn_implementation": str(model.config._attn_implementation),
    }
    save_file(tensors, os.path.join(OUT, "reference.safetensors"), metadata=meta)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {OUT}: {sorted(os.listdir(OUT))}, {total} bytes")


if __name__ == "__main__":
    main()
