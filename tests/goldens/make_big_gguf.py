#!/usr/bin/python3
"""A multi-GB random Llama GGUF file in Q8_0, written at test time for the memory test of
`attntrace model FILE.gguf` (tests/e2e/gguf_memory.sh): the dequantized layer, not the file, must
bound the memory. Also the F32 model the GGUF benchmark quantizes (tests/bench/gguf_bench.py).

  make_big_gguf.py FILE (--gb N | --layers N) [--hidden E] [--intermediate I] [--heads H]
                   [--kv-heads G] [--vocab V] [--seed S] [--f32] [--vocabulary]

Writes FILE as gguf_writer.py writes a converted model (the same key/values, tensor names and
layout; the tokenizer left out: --ids runs need none), with as many layers as bring it to about N
GB, every 2-D tensor (the token embedding and the output included) in Q8_0 and the norms in F32,
and prints one JSON line: {"file", "bytes", "layers", "layer_bytes_stored", "layer_bytes_f32",
"seconds"}. Nothing is held whole: each tensor is streamed in chunks of random Q8_0 blocks (a f16
scale of 2^-12 .. 2^-10 and 32 random int8 quants: |w| < 0.03, so a forward stays finite); norm
gains are 1.0. numpy only. Default shape: E 2048, I 5632, 16 heads, 4 kv heads, vocab 32000: 48 MB
of Q8_0 a layer, 180 MB in float32. --f32: every tensor in F32 (N(0, 0.02^2) weights), for
llama_model_quantize to make the other types from. --vocabulary: a byte-level "gpt2" vocabulary of
V tokens (the 256 byte symbols, one merge, fillers), so that llama.cpp loads the file.
"""
import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_writer as gw  # noqa: E402

BLOCK, BLOCK_BYTES = 32, 34  # Q8_0
CHUNK_BLOCKS = 1 << 20       # 34 MiB of blocks per write


def shapes(a, layers):
    """[(GGUF name, numpy shape)] in convert_hf_to_gguf.py's order."""
    e, p = a.hidden, a.hidden // a.heads
    out = [("token_embd.weight", (a.vocab, e))]
    for n in range(layers):
        b = f"blk.{n}."
        out += [(b + "attn_norm.weight", (e,)), (b + "attn_q.weight", (a.heads * p, e)),
                (b + "attn_k.weight", (a.kv_heads * p, e)), (b + "attn_v.weight", (a.kv_heads * p, e)),
                (b + "attn_output.weight", (e, a.heads * p)), (b + "ffn_norm.weight", (e,)),
                (b + "ffn_gate.weight", (a.intermediate, e)), (b + "ffn_up.weight", (a.intermediate, e)),
                (b + "ffn_down.weight", (e, a.intermediate))]
    return out + [("output_norm.weight", (e,)), ("output.weight", (a.vocab, e))]


def nbytes(shape, f32=False):
    n = int(np.prod(shape, dtype=np.int64))
    return 4 * n if len(shape) == 1 or f32 else n // BLOCK * BLOCK_BYTES


def vocabulary(w, size):
    """A byte-level BPE vocabulary of SIZE tokens that llama.cpp's gpt2 tokenizer loads."""
    symbols = [chr(b) for b in range(ord("!"), ord("~") + 1)] + [chr(b) for b in range(ord("¡"), ord("¬") + 1)] + \
        [chr(b) for b in range(ord("®"), ord("ÿ") + 1)]
    symbols += [chr(256 + n) for n in range(256 - len(symbols))]  # GPT-2's bytes_to_unicode, in some order
    tokens = symbols + ["Ġt"] + [f"<t{i}>" for i in range(size - len(symbols) - 1)]
    w.add("tokenizer.ggml.model", "gpt2", gw.STRING)
    w.add("tokenizer.ggml.pre", "gpt-2", gw.STRING)
    w.add("tokenizer.ggml.tokens", tokens, gw.ARRAY, gw.STRING)
    w.add("tokenizer.ggml.token_type", [gw.TOKEN_NORMAL] * size, gw.ARRAY, gw.INT32)
    w.add("tokenizer.ggml.merges", ["Ġ t"], gw.ARRAY, gw.STRING)


def header(a, layers, tensors):
    w = gw.Writer("llama")
    w.add("general.type", "model", gw.STRING)
    w.add("general.name", "big", gw.STRING)
    for key, value in (("block_count", layers), ("context_length", 4096), ("embedding_length", a.hidden),
                       ("feed_forward_length", a.intermediate), ("attention.head_count", a.heads),
                       ("attention.head_count_kv", a.kv_heads), ("vocab_size", a.vocab),
                       ("rope.dimension_count", a.hidden // a.heads)):
        w.add(f"llama.{key}", value, gw.UINT32)
    w.add("llama.rope.freq_base", 10000.0, gw.FLOAT32)
    w.add("llama.attention.layer_norm_rms_epsilon", 1e-5, gw.FLOAT32)
    w.add("general.file_type", gw.FTYPE["f32" if a.f32 else "q8_0"], gw.UINT32)
    w.add("general.quantization_version", gw.QUANT_VERSION, gw.UINT32)
    if a.vocabulary:
        vocabulary(w, a.vocab)
    out = bytearray(struct.pack("<IIQQ", gw.GGUF_MAGIC, gw.GGUF_VERSION, len(tensors), len(w.kv)))
    for key, (value, vtype, sub) in w.kv.items():
        out += gw.pack_value(key, gw.STRING) + struct.pack("<I", vtype) + gw.pack_value(value, vtype, sub)
    offset = 0
    for name, shape in tensors:
        out += gw.pack_value(name, gw.STRING) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in reversed(shape))
        out += struct.pack("<IQ", gw.GGML["f32" if len(shape) == 1 or a.f32 else "q8_0"], offset)
        size = nbytes(shape, a.f32)
        offset += size + (-size % gw.ALIGNMENT)
    return bytes(out) + bytes(-len(out) % gw.ALIGNMENT)


def write_tensor(f, shape, rng, f32):
    if len(shape) == 1:
        f.write(np.ones(shape, dtype="<f4").tobytes())
    elif f32:
        left = int(np.prod(shape, dtype=np.int64))
        while left:
            n = min(left, CHUNK_BLOCKS * BLOCK)
            f.write((0.02 * rng.standard_normal(n, dtype=np.float32)).astype("<f4").tobytes())
            left -= n
    else:
        left = int(np.prod(shape, dtype=np.int64)) // BLOCK
        while left:
            n = min(left, CHUNK_BLOCKS)
            blocks = rng.integers(-127, 128, size=(n, BLOCK_BYTES), dtype=np.int8).view(np.uint8)
            scale = (0x0C00 + rng.integers(0, 0x0800, size=n, dtype=np.uint16)).astype("<u2")  # 2^-12 .. 2^-10
            blocks[:, :2] = scale.view(np.uint8).reshape(n, 2)
            f.write(blocks.tobytes())
            left -= n
    f.write(bytes(-nbytes(shape, f32) % gw.ALIGNMENT))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--gb", type=float)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--f32", action="store_true", help="every tensor in F32")
    ap.add_argument("--vocabulary", action="store_true", help="a vocabulary llama.cpp loads")
    a = ap.parse_args(argv)
    if (a.gb is None) == (a.layers is None):
        ap.error("give one of --gb and --layers")
    start = time.monotonic()
    one = shapes(a, 1)
    layer = [s for name, s in one if name.startswith("blk.")]
    ends = sum(nbytes(s, a.f32) for name, s in one if not name.startswith("blk."))
    layer_bytes = sum(nbytes(s, a.f32) for s in layer)
    layers = a.layers or max(1, round((a.gb * 1e9 - ends) / layer_bytes))
    tensors = shapes(a, layers)
    rng = np.random.default_rng(a.seed)
    with open(a.file, "wb") as f:
        f.write(header(a, layers, tensors))
        for _, shape in tensors:
            write_tensor(f, shape, rng, a.f32)
    size = Path(a.file).stat().st_size
    print(json.dumps({"file": a.file, "bytes": size, "layers": layers, "layer_bytes_stored": layer_bytes,
                      "layer_bytes_f32": 4 * sum(int(np.prod(s)) for s in layer),
                      "seconds": round(time.monotonic() - start, 1)}))


if __name__ == "__main__":
    main()
