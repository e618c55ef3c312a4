#!/usr/bin/python3
"""GGUF files of every architecture attntrace reads from GGUF, in several tensor types, and their
goldens, for `attntrace model FILE.gguf` (tests/e2e/gguf_goldens.sh).

Regenerate: /usr/bin/python3 tests/goldens/make_gguf_goldens.py   (needs llama.cpp from npm through
            tests/goldens/llama_cpp.py; rewrites tests/fixtures/gguf/; about a minute)

Per case, tests/fixtures/gguf/<case>/:
  model.gguf (or model-0000k-of-0000N.gguf)  written from a tiny checkpoint by gguf_writer.py as
                     convert_hf_to_gguf.py writes it (f32, f16, bf16, q8_0), or quantized from its f32
                     form by llama.cpp itself (llama_model_quantize, pure: every 2-D tensor in the
                     type's own kind, falling back where ggml does; q4_k_m: llama.cpp's own mix)
  ids.npy            (L,) the input ids
  golden/hidden_states.npy (N + 1, L, E), attentions.npy (N, H, L, L), logits.npy (L, V): float64,
                     hf_model.py (the float64 transcription of transformers' forward) run on the
                     file's weights dequantized by ggml itself (ggml_get_type_traits(type)->to_float),
                     with the configuration llama.cpp reads from the file (b)
  golden/llama_cpp_logits.npy (L, V) float32: llama.cpp's own logits of the file (a), one
                     llama_decode of all L positions, no flash attention and an F32 KV cache (its
                     quantized products are then the only change)
tests/fixtures/gguf/cases.json lists each case with its tensor types and the measured distance of
(a) from (b): max |a - b| over the logits, and the same with llama.cpp's defaults (F16 KV cache,
flash attention), which docs/gguf.md quotes.

Sources: the whole-model fixtures (tests/fixtures/models/full_*, E 32) for the 32-element block
types, and for the 256-element K types and IQ4_XS a one-layer Llama made here (E 256, seeded, with
full_llama's tokenizer), whose checkpoint is not kept. What llama.cpp runs differently from the
checkpoint's config.json is what (b) follows: the "llama" architecture has no sliding window
(Mistral's files), neither does "qwen2" here nor "phi3", GPT-2 has no scale_attn_by_inverse_layer_idx
and its MLP is 4 E wide, Gemma 2 and 3 scale the scores by 1/sqrt(head dim) whatever
query_pre_attn_scalar was and Gemma 3's sliding window pattern is llama.cpp's 6 (convert writes
none), and llama3 rope scaling is the rope_freqs factors convert_hf_to_gguf.py stores
(each frequency divided by its float32 factor, as ggml's rope does with freq_factors).
"""
import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gguf_writer  # noqa: E402
import hf_attention  # noqa: E402
import hf_model  # noqa: E402
import llama_cpp_model  # noqa: E402
import st  # noqa: E402

MODELS = HERE.parent / "fixtures" / "models"
OUT = HERE.parent / "fixtures" / "gguf"

# name, source (a fixture folder or "llama256"), the type gguf_writer writes, the llama.cpp
# quantization made from it (or None), options
CASES = [
    ("llama_f32", "full_llama", "f32", None, {}),
    ("llama_q8_0", "full_llama", "q8_0", None, {}),
    ("llama_q4_0", "full_llama", "f32", "q4_0", {}),
    ("llama_iq4_nl", "full_llama", "f32", "iq4_nl", {}),
    ("mistral_q5_1", "full_mistral", "f32", "q5_1", {}),
    ("qwen2_f16", "full_qwen2", "f16", None, {}),
    ("qwen2_q4_1", "full_qwen2", "f32", "q4_1", {}),
    ("qwen3_bf16_split", "full_qwen3", "bf16", None, {"split": 12}),
    ("qwen3_q5_0", "full_qwen3", "f32", "q5_0", {}),
    ("gpt2_q8_0", "full_gpt2", "q8_0", None, {}),
    ("gemma_f16", "full_gemma", "f16", None, {}),
    ("gemma2_q8_0", "full_gemma2", "q8_0", None, {}),
    ("gemma3_q5_1", "full_gemma3", "f32", "q5_1", {}),
    ("phi3_q4_0", "full_phi3", "f32", "q4_0", {}),
    ("llama256_q2_k", "llama256", "f32", "q2_k", {}),
    ("llama256_q3_k", "llama256", "f32", "q3_k_s", {}),
    ("llama256_q4_k", "llama256", "f32", "q4_k_s", {}),
    ("llama256_q5_k", "llama256", "f32", "q5_k_s", {}),
    ("llama256_q6_k", "llama256", "f32", "q6_k", {}),
    ("llama256_iq4_xs", "llama256", "f32", "iq4_xs", {}),
    ("llama256_q4_k_m", "llama256", "f32", "q4_k_m", {"mixed": True}),
]


# ------------------------------------------------------------------------------------ sources
def make_llama256(folder):
    """A one-layer Llama, E 256 (four heads of 64, two kv heads), I 256, full_llama's 282-token
    tokenizer, tied embeddings; weights N(0, 0.05^2), norm gains 1 + N(0, 0.1^2), seed 256."""
    folder.mkdir(parents=True)
    e, i, v, p = 256, 256, 282, 64
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": e, "intermediate_size": i,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": p, "num_hidden_layers": 1,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": True, "vocab_size": v, "bos_token_id": 280, "eos_token_id": 281,
           "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    shutil.copy(MODELS / "full_llama" / "tokenizer.json", folder / "tokenizer.json")
    rng = np.random.default_rng(256)
    w = lambda *shape: (0.05 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    g = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    t = {"model.embed_tokens.weight": w(v, e), "model.norm.weight": g(e),
         "model.layers.0.input_layernorm.weight": g(e), "model.layers.0.post_attention_layernorm.weight": g(e),
         "model.layers.0.self_attn.q_proj.weight": w(4 * p, e), "model.layers.0.self_attn.k_proj.weight": w(2 * p, e),
         "model.layers.0.self_attn.v_proj.weight": w(2 * p, e), "model.layers.0.self_attn.o_proj.weight": w(e, 4 * p),
         "model.layers.0.mlp.gate_proj.weight": w(i, e), "model.layers.0.mlp.up_proj.weight": w(i, e),
         "model.layers.0.mlp.down_proj.weight": w(e, i)}
    st.write(folder / "model.safetensors", t)
    np.save(folder / "ids.npy", np.load(MODELS / "full_llama" / "ids.npy"))


def source_folder(source, scratch):
    if source != "llama256":
        return MODELS / source
    folder = scratch / "llama256"
    if not folder.exists():
        make_llama256(folder)
    return folder


# --------------------------------------------------------------------------------- reference (b)
def read_gguf(paths):
    """{name: (ggml type, numpy shape, raw bytes)} of every tensor in PATHS (gguf-py's reader)."""
    gguf = gguf_writer.gguf_py()
    out = {}
    for path in paths:
        r = gguf.GGUFReader(path)
        for t in r.tensors:
            raw = bytes(r.data[t.data_offset:t.data_offset + t.n_bytes])
            out[t.name] = (int(t.tensor_type), tuple(int(d) for d in reversed(t.shape)), raw)
    return out


def hf_name(model_type, gguf_name):
    """gguf_writer.gguf_name inverted: the checkpoint name (no prefix) of a GGUF tensor name."""
    stem = "h" if model_type == "gpt2" else "layers"
    table = gguf_writer.GPT2_NAMES if model_type == "gpt2" else dict(gguf_writer.LLAMA_NAMES)
    if model_type == "phi3":
        table = {k: v for k, v in table.items() if k not in ("mlp.up_proj",)}
    if model_type in ("gemma2", "gemma3_text"):
        table = {**{k: v for k, v in table.items() if k != "post_attention_layernorm"}, **gguf_writer.SANDWICH_NAMES}
    base, _, suffix = gguf_name.rpartition(".")
    if base.startswith("blk."):
        _, n, short = base.split(".", 2)
        return f"{stem}.{n}.{next(k for k, v in table.items() if v == short)}.{suffix}"
    outer = {v: k for k, v in gguf_writer.OUTER.items() if (k in ("wte", "wpe", "ln_f")) == (model_type == "gpt2")}
    return f"{outer[base]}.{suffix}"


def unpermute(w, n_head):
    """LlamaModel.permute inverted: each head's rows (P/2, 2) -> (2, P/2)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def dequantized_checkpoint(paths, cfg):
    """The file's tensors dequantized by ggml, under the checkpoint's names and layouts, float64."""
    kind = cfg["model_type"]
    out = {}
    for name, (ggml_type, shape, raw) in read_gguf(paths).items():
        if name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"):
            continue
        x = llama_cpp_model.to_float(ggml_type, raw, int(np.prod(shape))).reshape(shape)
        if kind in ("llama", "mistral") and name.split(".")[-2] in ("attn_q", "attn_k"):
            heads = cfg["num_attention_heads"] if ".attn_q." in name else cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
            x = unpermute(x, heads)
        if kind == "gpt2" and name.split(".")[-2] in ("attn_qkv", "attn_output", "ffn_up", "ffn_down") and x.ndim == 2:
            x = x.T  # back to Conv1D's (in, out)
        if kind in gguf_writer.GEMMAS and name.endswith("norm.weight"):
            x = x - 1  # GemmaRMSNorm's w from the stored 1 + w
        out[hf_name(kind, name)] = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
    return out


@contextlib.contextmanager
def rope_factors(paths, cfg):
    """With a rope_freqs.weight tensor, the rotary as llama.cpp computes it (ggml rope's
    freq_factors: each default frequency divided by its factor) instead of cfg's llama3 formula;
    CFG's rope scaling dropped meanwhile."""
    tensors = read_gguf(paths)
    if "rope_freqs.weight" not in tensors:
        yield cfg
        return
    _, shape, raw = tensors["rope_freqs.weight"]
    factors = torch.from_numpy(np.frombuffer(raw, dtype="<f4").astype(np.float64))
    original = hf_attention.inv_freq
    hf_attention.inv_freq = lambda rp, dim: original(dict(rp, rope_type="default"), dim) / factors
    try:
        yield {k: v for k, v in cfg.items() if k not in ("rope_scaling", "rope_parameters")}
    finally:
        hf_attention.inv_freq = original


def as_llama_cpp_runs(cfg):
    """CFG as llama.cpp reads the converted file (module docstring); float32 epsilons and thetas."""
    cfg = dict(cfg)
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    if cfg["model_type"] == "mistral":  # written as "llama": no sliding window
        cfg.update(model_type="llama", sliding_window=None)
    if cfg["model_type"] == "qwen2":
        cfg["use_sliding_window"] = False
    if cfg["model_type"] in ("gemma2", "gemma3_text"):  # 1/sqrt(head dim) (src/models/gemma2.cpp, gemma3.cpp)
        cfg["query_pre_attn_scalar"] = cfg.get("head_dim", 256)
    if cfg["model_type"] == "gemma3_text":  # no sliding_window_pattern is written: llama.cpp's 6
        cfg.pop("sliding_window_pattern", None)
        cfg.pop("layer_types", None)
    if cfg["model_type"] == "phi3":  # llama.cpp disables Phi-3's sliding window
        cfg["sliding_window"] = None
    if cfg["model_type"] == "gpt2":
        cfg.update(scale_attn_by_inverse_layer_idx=False, activation_function="gelu_new", n_inner=4 * cfg["n_embd"])
        cfg["layer_norm_epsilon"] = f32(cfg.get("layer_norm_epsilon", 1e-5))
    else:
        cfg["rms_norm_eps"] = f32(cfg.get("rms_norm_eps", 1e-6))
        if "rope_theta" in cfg:
            cfg["rope_theta"] = f32(cfg["rope_theta"])
    return cfg


# ---------------------------------------------------------------------------------------- cases
def write_file(folder, source, outtype, quant, opts, scratch):
    """The case's GGUF file(s) in FOLDER; their paths."""
    if quant is None:
        return gguf_writer.convert(source, outtype).write(folder / "model.gguf", opts.get("split", 0))
    f32 = scratch / (source.name + ".f32.gguf")
    if not f32.exists():
        gguf_writer.convert(source, "f32").write(f32)
    llama_cpp_model.quantize(f32, folder / "model.gguf", quant, pure=not opts.get("mixed"))
    return [folder / "model.gguf"]


def tensor_types(paths):
    counts = {}
    for ggml_type, _, _ in read_gguf(paths).values():
        name = gguf_writer.gguf_py().GGMLQuantizationType(ggml_type).name.lower()
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def make_case(name, source_name, outtype, quant, opts, scratch):
    source = source_folder(source_name, scratch)
    folder = OUT / name
    (folder / "golden").mkdir(parents=True)
    paths = write_file(folder, source, outtype, quant, opts, scratch)
    ids = np.load(source / "ids.npy")
    np.save(folder / "ids.npy", ids)
    cfg = json.loads((source / "config.json").read_text())
    with rope_factors(paths, as_llama_cpp_runs(cfg)) as runs:
        b = hf_model.forward(dequantized_checkpoint(paths, cfg), runs, torch.from_numpy(ids))
    for key in ("hidden_states", "attentions", "logits"):
        np.save(folder / "golden" / f"{key}.npy", b[key].numpy())
    a, _ = llama_cpp_model.logits(paths[0], list(ids), exact=True)
    default, _ = llama_cpp_model.logits(paths[0], list(ids), exact=False)
    np.save(folder / "golden" / "llama_cpp_logits.npy", a)
    ref = b["logits"].numpy()
    scale = float(np.abs(ref).max())
    return {"name": name, "source": source_name, "architecture": gguf_writer.ARCH[cfg["model_type"]],
            "written_as": outtype, "quantized_to": quant, "files": [p.name for p in paths],
            "tensor_types": tensor_types(paths), "length": len(ids), "logits_max_abs": scale,
            "llama_cpp_vs_reference": float(np.abs(a - ref).max()),
            "llama_cpp_default_vs_reference": float(np.abs(default - ref).max())}


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    cases = []
    with tempfile.TemporaryDirectory() as d:
        for name, source, outtype, quant, opts in CASES:
            cases.append(make_case(name, source, outtype, quant, opts, Path(d)))
            c = cases[-1]
            print(f"{name:18} {' '.join(f'{k} {v}' for k, v in c['tensor_types'].items()):34} llama.cpp - reference: "
                  f"{c['llama_cpp_vs_reference']:.3g} (defaults {c['llama_cpp_default_vs_reference']:.3g}) "
                  f"of |logits| <= {c['logits_max_abs']:.3g}")
    doc = {"comment": "GGUF cases written by tests/goldens/make_gguf_goldens.py (see there); checked by "
                      "tests/e2e/gguf_goldens.sh. llama_cpp_vs_reference: max |llama.cpp's logits - the float64 "
                      "reference on the dequantized weights| (no flash attention, F32 KV cache); "
                      "llama_cpp_default_vs_reference: the same with llama.cpp's default context.",
           "cases": cases}
    (OUT / "cases.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
