#!/usr/bin/python3
"""A multi-GB random bf16 Llama-like checkpoint, written at test time for the memory test of
`attntrace model` (issue 27: peak RSS at most the largest layer's weights in the compute dtype,
plus the activations, plus 200 MB, whatever the number of layers).

  make_big_checkpoint.py DIR --gb N [--family llama|mistral|qwen2|qwen3|mixtral] [--hidden E]
                         [--intermediate I] [--heads H] [--kv-heads G] [--vocab V] [--shard-gb S]
                         [--f32] [--experts X] [--top-k K]

--family mixtral: each layer's MLP is a mixture of X experts of size I (MixtralForCausalLM names:
block_sparse_moe.gate (X, E), block_sparse_moe.experts.J.w1 / w3 (I, E) and w2 (E, I)), K per token;
"layer_bytes_*" count every expert of a layer.

Writes DIR/config.json, DIR/model-0000K-of-0000M.safetensors (shards of about S GB, default 2, as
save_pretrained's max_shard_size does; one layer may span two shards) and
DIR/model.safetensors.index.json, with as many layers as bring the total to about N GB (at least
1), and prints one JSON line: {"dir", "bytes", "layers", "layer_bytes_bf16", "layer_bytes_f32",
"embedding_bytes_bf16", "seconds"}. Nothing is held whole: each tensor is streamed to disk in 32 MiB
chunks of numpy random bits, shaped into bf16 numbers of magnitude 2^-9 .. 2^-5 with a random sign
(finite, so a forward stays finite; the norm gains are exactly 1.0). Speed is the disk's: 2 GB took
16 s on a 2-core development machine (3 s of it CPU). Default shape: E 2048, I 5632, 16 heads, 4 kv
heads, vocab 32000, untied: 90 MB of bf16 a layer (180 MB in f32), 19 layers for --gb 2. With
--f32 the same numbers are stored as F32 (the bf16 bits widened; torch_dtype float32), which a
float32 run reads in place from the mapping instead of converting; "layer_bytes_bf16" stays the
bf16 size of a layer.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

CHUNK = 16 * 1024 * 1024  # bf16 elements per write (32 MiB)
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "mixtral": "MixtralForCausalLM"}


def layer_shapes(a, n):
    """[(name, shape)] of layer N, in the names of *ForCausalLM (modeling_llama.py and copies)."""
    e, p = a.hidden, a.hidden // a.heads
    pre = f"model.layers.{n}."
    shapes = [(pre + "input_layernorm.weight", (e,)), (pre + "post_attention_layernorm.weight", (e,)),
              (pre + "self_attn.q_proj.weight", (a.heads * p, e)), (pre + "self_attn.k_proj.weight", (a.kv_heads * p, e)),
              (pre + "self_attn.v_proj.weight", (a.kv_heads * p, e)), (pre + "self_attn.o_proj.weight", (e, a.heads * p)),
              (pre + "mlp.gate_proj.weight", (a.intermediate, e)), (pre + "mlp.up_proj.weight", (a.intermediate, e)),
              (pre + "mlp.down_proj.weight", (e, a.intermediate))]
    if a.family == "mixtral":  # the MLP is the experts' (MixtralSparseMoeBlock)
        shapes = shapes[:6] + [(pre + "block_sparse_moe.gate.weight", (a.experts, e))]
        for j in range(a.experts):
            stem = f"{pre}block_sparse_moe.experts.{j}."
            shapes += [(stem + "w1.weight", (a.intermediate, e)), (stem + "w3.weight", (a.intermediate, e)),
                       (stem + "w2.weight", (e, a.intermediate))]
    if a.family == "qwen2":
        shapes += [(pre + f"self_attn.{x}_proj.bias", (s,)) for x, s in (("q", a.heads * p), ("k", a.kv_heads * p),
                                                                          ("v", a.kv_heads * p))]
    if a.family == "qwen3":
        shapes += [(pre + "self_attn.q_norm.weight", (p,)), (pre + "self_attn.k_norm.weight", (p,))]
    return shapes


def numel(shape):
    return int(np.prod(shape, dtype=np.int64))


def element_bytes(a):
    return 4 if a.f32 else 2


def config(a, layers):
    cfg = {"architectures": [ARCHITECTURES[a.family]], "model_type": a.family, "hidden_act": "silu",
           "hidden_size": a.hidden, "intermediate_size": a.intermediate, "num_attention_heads": a.heads,
           "num_key_value_heads": a.kv_heads, "num_hidden_layers": layers, "head_dim": a.hidden // a.heads,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "torch_dtype": "float32" if a.f32 else "bfloat16", "vocab_size": a.vocab,
           "bos_token_id": 1, "eos_token_id": 2, "attention_bias": False, "transformers_version": "4.46.3"}
    if a.family in ("qwen2", "qwen3"):
        cfg.update(use_sliding_window=False, sliding_window=None, max_window_layers=layers)
    if a.family in ("mistral", "mixtral"):
        cfg["sliding_window"] = None
    if a.family == "mixtral":
        cfg.update(num_local_experts=a.experts, num_experts_per_tok=a.top_k)
    return cfg


def write_tensor(f, name, shape, rng, f32):
    """Stream numel(shape) bf16 values (widened to F32 with F32): gains (names ending norm.weight)
    1.0, everything else random."""
    left = numel(shape)
    while left:
        n = min(left, CHUNK)
        if name.endswith("norm.weight"):
            bits = np.full(n, 0x3F80, dtype="<u2")
        else:  # sign and mantissa random, exponent 118..121: |x| in [2^-9, 2^-5)
            r = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
            bits = (r & np.uint16(0x807F)) | ((np.uint16(118) + ((r >> np.uint16(7)) & np.uint16(3))) << np.uint16(7))
        if f32:
            f.write((bits.astype("<u4") << np.uint32(16)).astype("<u4", copy=False).tobytes())
        else:
            f.write(bits.astype("<u2", copy=False).tobytes())
        left -= n


def write_shard(path, tensors, rng, f32):
    """One .safetensors file: the header (8-byte length, JSON padded to 8) then the data, in order."""
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        size = (4 if f32 else 2) * numel(shape)
        header[name] = {"dtype": "F32" if f32 else "BF16", "shape": list(shape), "data_offsets": [at, at + size]}
        at += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in tensors:
            write_tensor(f, name, shape, rng, f32)
    return at


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--gb", type=float, required=True, help="about this many GB (1e9 bytes) in all")
    ap.add_argument("--family", choices=sorted(ARCHITECTURES), default="llama")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--shard-gb", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--experts", type=int, default=8, help="mixtral: experts per layer")
    ap.add_argument("--top-k", type=int, default=2, help="mixtral: experts per token")
    ap.add_argument("--f32", action="store_true", help="store F32 (the same values) instead of BF16")
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        ap.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")
    start = time.monotonic()
    ends = [("model.embed_tokens.weight", (a.vocab, a.hidden)), ("model.norm.weight", (a.hidden,)),
            ("lm_head.weight", (a.vocab, a.hidden))]
    layer_bytes = 2 * sum(numel(s) for _, s in layer_shapes(a, 0))
    end_bytes = 2 * sum(numel(s) for _, s in ends)
    layers = max(1, round((a.gb * 1e9 - element_bytes(a) // 2 * end_bytes) / (element_bytes(a) // 2 * layer_bytes)))
    order = [ends[0]] + [t for n in range(layers) for t in layer_shapes(a, n)] + ends[1:]
    shards, current, size = [], [], 0
    for name, shape in order:  # fill shards in order, as huggingface_hub's split_torch_state_dict_into_shards
        if current and size + element_bytes(a) * numel(shape) > a.shard_gb * 1e9:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape))
        size += element_bytes(a) * numel(shape)
    shards.append(current)
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    weight_map, total = {}, 0
    for i, tensors in enumerate(shards, start=1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(a.dir, fname), tensors, rng, a.f32)
        weight_map.update({name: fname for name, _ in tensors})
    with open(os.path.join(a.dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config(a, layers), f, indent=2, sort_keys=True)
    print(json.dumps({"dir": a.dir, "bytes": total, "layers": layers, "layer_bytes_bf16": layer_bytes,
                      "layer_bytes_f32": 2 * layer_bytes, "embedding_bytes_bf16": 2 * a.vocab * a.hidden,
                      "seconds": round(time.monotonic() - start, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
