#!/usr/bin/env python3
"""Greedy Llama decoding speed: `lumen generate` against ONNX Runtime with a KV cache, on the CPU.

A randomly initialised transformers.LlamaForCausalLM (f32; default hidden 512, intermediate
1376, 8 layers, 8 heads, 4 kv heads, vocab 4096, max_position_embeddings 256, rope_theta 10000)
is saved with save_pretrained into a cache directory outside the repository (default
~/.cache/lumen-bench/llama-h512-i1376-l8-a8-kv4-v4096-p256/, reused when present). Both
engines decode the same prompt greedily for --tokens new tokens:

  * ONNX Runtime: the model's decoder step is exported once (torch.onnx.export, legacy
    TorchScript exporter, opset 17, eager attention) to <model dir>/onnx/decoder_step.onnx:
    inputs input_ids [1, q], attention_mask [1, past + q] (all ones), position_ids [1, q] and
    past.{i}.key / past.{i}.value [1, kv_heads, past, head_dim] for each layer i; outputs logits
    [1, q, vocab] and present.{i}.key / present.{i}.value [1, kv_heads, past + q, head_dim]
    (transformers' DynamicCache filled from the inputs). A Python loop runs the prompt once
    (prefill, past of length 0), then feeds each argmax token back with the presents as the
    next pasts. Sessions use ORT_ENABLE_ALL, intra_op_num_threads T, inter_op 1, sequential.
  * lumen: `target/release/lumen generate MODEL_DIR --prompt-ids 1,2,... --max-new-tokens N
    --threads T --json`, whose JSON gives "tokens" (new tokens only), "prefill_tokens_per_s"
    and "decode_tokens_per_s" (lumen's own timers). Without a `generate` subcommand the script
    prints "lumen: skipped (no generate subcommand)" and reports ONNX Runtime alone.
  * lumen-onnx: the same command given ORT's decoder_step.onnx instead of the model directory
    (lumen's ONNX decoder route: the exported step compiled once for the bound, a decode step
    and a prefill step over a padded host cache); --no-onnx-route leaves it out.

Both are checked against transformers' own model.generate(do_sample=False, use_cache=True) on
the same prompt. A random model can have near-ties, so a token mismatch where generate's top-1
minus top-2 logit gap is under --tie-margin is reported as a tie, not a failure.

Timing definitions (ORT side; lumen reports its own): prefill = one run over the P prompt
tokens, which also yields the first new token; prefill tokens/s = P / that time. Decode =
the remaining N - 1 single-token steps; decode tokens/s = (N - 1) / their total time (Python
loop and feed overhead included). Rounds interleave the engines (lumen T=1, ORT T=1, lumen T=2,
ORT T=2, then again) so machine noise hits both alike; the table gives the best and the median
over --rounds.

Memory-bandwidth bound: at batch 1 every decode step reads all the weights once (all but the
embedding table, of which one row is read; lm_head is separate unless tied). Copy bandwidth is
measured with numpy (np.copyto of a 256 MiB f32 array, best of 5, bytes read + written per
second); bandwidth / weight bytes read per token is an upper bound on decode tokens/s (KV-cache
reads, which grow with the position, only lower it).

How to run it (from the repository root):

    python3 -m pip install torch==2.15.0 transformers==5.23.0 onnx==1.23.2 onnxruntime==1.32.0
    cargo build --release
    python3 scripts/bench_llama_decode.py [--tokens 64] [--prompt-len 16] [--threads 1,2]
        [--rounds 3] [--json]
    python3 scripts/bench_llama_decode.py --hidden 128 --intermediate 344 --layers 2 \\
        --vocab 512 --tokens 16 --rounds 1        # a quick small run

With --json the readable table goes to stderr and one JSON object to stdout.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np


def log(*a, **k):
    print(*a, **k, file=LOG, flush=True)


LOG = sys.stdout


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=64, help="new tokens per decode (N)")
    p.add_argument("--prompt-len", type=int, default=16, help="prompt length (P)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model-dir", default=None, help="default: ~/.cache/lumen-bench/llama-<dims>")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--intermediate", type=int, default=1376)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--max-pos", type=int, default=256)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lumen", default=os.path.join("target", "release", "lumen"))
    p.add_argument("--no-lumen", action="store_true", help="time ONNX Runtime only")
    p.add_argument("--no-onnx-route", action="store_true",
                   help="skip lumen-onnx (lumen generate on the exported decoder_step.onnx)")
    p.add_argument("--tie-margin", type=float, default=1e-3)
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    a = p.parse_args()
    a.threads = [int(t) for t in a.threads.split(",") if t]
    if a.prompt_len < 1 or a.tokens < 2:
        p.error("need --prompt-len >= 1 and --tokens >= 2")
    if a.prompt_len + a.tokens > a.max_pos:
        p.error(f"--prompt-len + --tokens ({a.prompt_len + a.tokens}) > --max-pos ({a.max_pos})")
    if a.model_dir is None:
        dims = (f"h{a.hidden}-i{a.intermediate}-l{a.layers}-a{a.heads}-kv{a.kv_heads}"
                f"-v{a.vocab}-p{a.max_pos}")
        if a.rope_theta != 10000.0:
            dims += f"-t{a.rope_theta:g}"
        if a.seed != 0:
            dims += f"-s{a.seed}"
        a.model_dir = os.path.join(os.path.expanduser("~"), ".cache", "lumen-bench", f"llama-{dims}")
    return a


# --- model ----------------------------------------------------------------------------------


def make_config(a):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        max_position_embeddings=a.max_pos,
        rope_parameters={"rope_type": "default", "rope_theta": a.rope_theta},
        rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        hidden_act="silu", bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )


def load_or_make_model(a):
    import torch
    from transformers import LlamaForCausalLM

    want = make_config(a)
    cfg_path = os.path.join(a.model_dir, "config.json")
    if not (os.path.exists(cfg_path) and os.path.exists(os.path.join(a.model_dir, "model.safetensors"))):
        log(f"making a random Llama in {a.model_dir}")
        torch.manual_seed(a.seed)
        model = LlamaForCausalLM(want).float().eval()
        os.makedirs(a.model_dir, exist_ok=True)
        model.save_pretrained(a.model_dir, safe_serialization=True)
    model = LlamaForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    c = model.config
    got = (c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers,
           c.num_attention_heads, c.num_key_value_heads, c.max_position_embeddings,
           c.rope_parameters["rope_theta"])
    exp = (a.vocab, a.hidden, a.intermediate, a.layers, a.heads, a.kv_heads, a.max_pos, a.rope_theta)
    if got != exp:
        sys.exit(f"error: {a.model_dir} holds a different model {got} (wanted {exp}); remove it "
                 "or pass another --model-dir")
    return model


def weight_bytes(model):
    """(all weight bytes, weight bytes read per decoded token)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.model.embed_tokens.weight
    per_token = total
    if model.lm_head.weight.data_ptr() != emb.data_ptr():
        per_token -= emb.numel() * emb.element_size()  # one row of the embedding table is read
        per_token += emb.shape[1] * emb.element_size()
    return total, per_token


def reference(model, prompt, n):
    import torch

    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n, min_new_tokens=n, output_logits=True,
                             return_dict_in_generate=True, use_cache=True, eos_token_id=None,
                             pad_token_id=0)
    tokens = out.sequences[0, len(prompt):].tolist()
    logits = torch.stack(out.logits, dim=1)[0].float().numpy()
    return tokens, logits


def agreement(tokens, ref_tokens, ref_logits, tie_margin):
    """'same', 'tie at step k (...)' or 'DIFFERS at step k (...)'."""
    if tokens is None:
        return "n/a"
    for k, (t, r) in enumerate(zip(tokens, ref_tokens)):
        if t != r:
            top2 = np.sort(ref_logits[k])[-2:]
            margin = float(top2[1] - top2[0])
            what = "tie" if margin < tie_margin else "DIFFERS"
            return f"{what} at step {k} (got {t}, generate {r}, generate's margin {margin:.2e})"
    if len(tokens) != len(ref_tokens):
        return f"DIFFERS: {len(tokens)} tokens, generate made {len(ref_tokens)}"
    return "same"


# --- ONNX Runtime ---------------------------------------------------------------------------


def onnx_names(layers):
    past = [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids"] + past, ["logits"] + present


def export_onnx(model, path):
    import torch
    from transformers import DynamicCache

    cfg = model.config
    layers, kv, hd = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=self.m.config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
            present = []
            for i in range(layers):
                present += [cache.layers[i].keys, cache.layers[i].values]
            return (out.logits, *present)

    # Trace with both a past and more than one query token, so the general causal-mask path
    # (not the q == 1 or past == 0 shortcuts) is what the graph records.
    p, q = 3, 2
    ids = torch.zeros(1, q, dtype=torch.long)
    mask = torch.ones(1, p + q, dtype=torch.long)
    pos = torch.arange(p, p + q)[None]
    past = [torch.zeros(1, kv, p, hd) for _ in range(2 * layers)]
    ins, outs = onnx_names(layers)
    dyn = {"input_ids": {1: "q"}, "attention_mask": {1: "total"}, "position_ids": {1: "q"},
           "logits": {1: "q"}}
    dyn.update({n: {2: "past"} for n in ins[3:]})
    dyn.update({n: {2: "total"} for n in outs[1:]})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Step(model).eval(), (ids, mask, pos, *past), tmp, input_names=ins,
                          output_names=outs, dynamic_axes=dyn, opset_version=17, dynamo=False)
    os.replace(tmp, path)


def ort_session(path, threads):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def ort_generate(session, cfg, prompt, n):
    """Greedy decode; returns (new tokens, prefill seconds, decode seconds for n - 1 steps)."""
    layers, kv, hd = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
    ins, _ = onnx_names(layers)
    past = [np.zeros((1, kv, 0, hd), np.float32) for _ in range(2 * layers)]
    cur = np.array([prompt], dtype=np.int64)
    seen = 0
    tokens = []
    t0 = time.perf_counter()
    t_prefill = None
    while len(tokens) < n:
        q = cur.shape[1]
        feed = {"input_ids": cur, "attention_mask": np.ones((1, seen + q), np.int64),
                "position_ids": np.arange(seen, seen + q, dtype=np.int64)[None]}
        feed.update(zip(ins[3:], past))
        out = session.run(None, feed)
        past = out[1:]
        seen += q
        tok = int(out[0][0, -1].argmax())
        tokens.append(tok)
        cur = np.array([[tok]], dtype=np.int64)
        if t_prefill is None:
            t_prefill = time.perf_counter()
    t_end = time.perf_counter()
    return tokens, t_prefill - t0, t_end - t_prefill


# --- lumen ----------------------------------------------------------------------------------


def lumen_has_generate(lumen):
    if not os.path.exists(lumen):
        return False, f"{lumen} not found (run `cargo build --release`)"
    r = subprocess.run([lumen, "generate", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "no generate subcommand"
    return True, ""


def lumen_generate(lumen, model_dir, prompt, n, threads):
    cmd = [lumen, "generate", model_dir, "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", str(n), "--threads", str(threads), "--json"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        lines = [l for l in r.stdout.splitlines() if l.strip().startswith("{")]
        if not lines:
            raise RuntimeError(f"no JSON in lumen's output: {r.stdout[-2000:]}")
        report = json.loads(lines[-1])
    return report, wall


# --- bandwidth ------------------------------------------------------------------------------


def copy_bandwidth(mib=256, repeats=5):
    src = np.ones(mib * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / best  # bytes read + written per second


# --- main -----------------------------------------------------------------------------------


def summary(values, higher_is_better=True):
    if not values:
        return None
    return {"best": (max if higher_is_better else min)(values), "median": statistics.median(values),
            "all": values}


def main():
    global LOG
    a = parse_args()
    if a.json:
        LOG = sys.stderr
    import onnxruntime as ort
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    model = load_or_make_model(a)
    cfg = model.config
    total_bytes, token_bytes = weight_bytes(model)
    rng = np.random.default_rng(a.seed)
    prompt = [int(x) for x in rng.integers(0, a.vocab, a.prompt_len)]
    t = time.perf_counter()
    ref_tokens, ref_logits = reference(model, prompt, a.tokens)
    ref_s = time.perf_counter() - t
    margins = np.diff(np.sort(ref_logits, axis=-1)[:, -2:], axis=-1)[:, 0]
    log(f"transformers {transformers.__version__} generate: {a.tokens} tokens in {ref_s:.2f} s "
        f"(smallest top-1 minus top-2 margin {margins.min():.2e})")

    onnx_path = os.path.join(a.model_dir, "onnx", "decoder_step.onnx")
    if not os.path.exists(onnx_path):
        t = time.perf_counter()
        export_onnx(model, onnx_path)
        log(f"exported {onnx_path} in {time.perf_counter() - t:.1f} s")
    del model

    bw = copy_bandwidth()
    bound = bw / token_bytes
    log(f"copy bandwidth {bw / 1e9:.2f} GB/s (numpy, 256 MiB, best of 5); weights "
        f"{total_bytes / 2**20:.1f} MiB, {token_bytes / 2**20:.1f} MiB read per token -> "
        f"bound {bound:.1f} tokens/s")

    sessions = {}
    check = {}
    for th in a.threads:
        s = ort_session(onnx_path, th)
        toks, _, _ = ort_generate(s, cfg, prompt, a.tokens)  # warm-up and correctness
        sessions[th] = s
        check[("ort", th)] = agreement(toks, ref_tokens, ref_logits, a.tie_margin)
        log(f"ORT {ort.__version__} {th} thread(s) vs generate: {check[('ort', th)]}")

    use_lumen, why = (False, "--no-lumen") if a.no_lumen else lumen_has_generate(a.lumen)
    # lumen twice: from the model directory (its Llama step, symbolic), and driving the same
    # exported ONNX step ORT runs (`lumen generate decoder_step.onnx`: fixed shapes over a
    # padded cache), unless --no-onnx-route.
    lumen_models = {"lumen": a.model_dir}
    if not a.no_onnx_route:
        lumen_models["lumen-onnx"] = onnx_path
    if not use_lumen:
        log(f"lumen: skipped ({why})")
        lumen_models = {}
    for e, path in list(lumen_models.items()):
        for th in a.threads:
            try:
                rep, _ = lumen_generate(a.lumen, path, prompt, a.tokens, th)  # warm-up
                check[(e, th)] = agreement([int(x) for x in rep["tokens"]], ref_tokens,
                                           ref_logits, a.tie_margin)
            except (RuntimeError, KeyError, ValueError) as err:
                log(f"{e}: failed, skipped: {err}")
                del lumen_models[e]
                break
            log(f"{e} {th} thread(s) vs generate: {check[(e, th)]}")
    use_lumen = "lumen" in lumen_models

    runs = {(e, th): {"prefill_tok_s": [], "decode_tok_s": [], "wall_s": []}
            for e in [*lumen_models, "ort"] for th in a.threads}
    for r in range(a.rounds):
        for th in a.threads:
            for e, path in lumen_models.items():
                rep, wall = lumen_generate(a.lumen, path, prompt, a.tokens, th)
                d = runs[(e, th)]
                d["prefill_tok_s"].append(float(rep["prefill_tokens_per_s"]))
                d["decode_tok_s"].append(float(rep["decode_tokens_per_s"]))
                d["wall_s"].append(wall)
            t = time.perf_counter()
            _, pre, dec = ort_generate(sessions[th], cfg, prompt, a.tokens)
            d = runs[("ort", th)]
            d["prefill_tok_s"].append(a.prompt_len / pre)
            d["decode_tok_s"].append((a.tokens - 1) / dec)
            d["wall_s"].append(time.perf_counter() - t)
        log(f"round {r + 1}/{a.rounds} done")

    log("")
    log(f"Llama decode: hidden {a.hidden}, intermediate {a.intermediate}, {a.layers} layers, "
        f"{a.heads} heads / {a.kv_heads} kv heads, vocab {a.vocab}; prompt {a.prompt_len}, "
        f"{a.tokens} new tokens, {a.rounds} rounds")
    head = (f"{'engine':<10} {'thr':>3} {'decode tok/s best':>17} {'median':>8} "
            f"{'prefill tok/s best':>18} {'median':>8} {'% of bound':>10}  tokens")
    log(head)
    log("-" * len(head))
    rows = []
    for (e, th), d in runs.items():
        dec, pre = summary(d["decode_tok_s"]), summary(d["prefill_tok_s"])
        if dec is None:
            continue
        log(f"{e:<10} {th:>3} {dec['best']:>17.1f} {dec['median']:>8.1f} {pre['best']:>18.1f} "
            f"{pre['median']:>8.1f} {100 * dec['median'] / bound:>9.1f}%  {check[(e, th)]}")
        rows.append({"engine": e, "threads": th, "decode_tokens_per_s": dec,
                     "prefill_tokens_per_s": pre, "wall_s": summary(d["wall_s"], False),
                     "vs_generate": check[(e, th)]})
    log(f"bandwidth bound: {bound:.1f} tokens/s ({bw / 1e9:.2f} GB/s copy, "
        f"{token_bytes / 2**20:.1f} MiB weights per token)")
    if use_lumen:
        for e in lumen_models:
            for th in a.threads:
                lm = statistics.median(runs[(e, th)]["decode_tok_s"])
                om = statistics.median(runs[("ort", th)]["decode_tok_s"])
                log(f"{th} thread(s): {e} / ORT decode tokens/s (medians) = {lm / om:.2f}")
    else:
        log(f"lumen: skipped ({why})")

    if a.json:
        print(json.dumps({
            "config": {"hidden": a.hidden, "intermediate": a.intermediate, "layers": a.layers,
                       "heads": a.heads, "kv_heads": a.kv_heads, "vocab": a.vocab,
                       "max_position_embeddings": a.max_pos, "rope_theta": a.rope_theta},
            "model_dir": a.model_dir, "onnx": onnx_path, "prompt": prompt,
            "tokens": a.tokens, "rounds": a.rounds, "threads": a.threads,
            "reference_tokens": ref_tokens, "reference_min_margin": float(margins.min()),
            "weight_bytes": total_bytes, "weight_bytes_per_token": token_bytes,
            "copy_bandwidth_bytes_per_s": bw, "bound_tokens_per_s": bound,
            "lumen": "ran" if use_lumen else f"skipped ({why})",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "onnxruntime": ort.__version__, "numpy": np.__version__},
            "results": rows,
        }))
    bad = [k for k, v in check.items() if v.startswith("DIFFERS")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
