#!/usr/bin/python3
"""GGUF files written from the tiny Hugging Face fixtures as llama.cpp's convert_hf_to_gguf.py
writes them, with numpy only (no llama.cpp needed: CI uses it to make large files at test time).

The format (llama.cpp ggml/docs/gguf.md; gguf-py/gguf/gguf_writer.py GGUFWriter, whose byte
layout this follows): "GGUF", version 3, tensor count, key/value count (u64), the key/values
(u64-length strings, a u32 value type, the value; an array: element type, u64 count, elements),
the tensor infos (name, n_dims, ne[0..n) = the numpy shape reversed, ggml type, offset from the
data section), zero padding to general.alignment (32), then each tensor's bytes padded to it.
Split files (gguf-split, GGUFWriter.format_shard_names): NAME-00001-of-0000N.gguf, each with
split.no / split.count / split.tensors.count, the first with every other key.

The conventions of convert_hf_to_gguf.py (llama.cpp conversion/*.py), for the families here:
  llama, mistral  -> "llama": q_proj / k_proj rows permuted for llama.cpp's rotary
                     (conversion/llama.py LlamaModel.permute, undo_permute), llama3 rope scaling as
                     a rope_freqs tensor of 1 / factor per frequency (generate_extra_tensors),
                     vocab_size and rope.dimension_count (set_gguf_parameters)
  qwen2, qwen3    -> "qwen2" / "qwen3": tensors as they are (conversion/qwen.py)
  gpt2            -> "gpt2": Conv1D weights transposed to (out, in) (conversion/gpt2.py); its own
                     set_gguf_parameters (context_length from n_positions here: the fixtures'
                     configs have no n_ctx; feed_forward_length 4 E)
  gemma, gemma2,  -> "gemma", "gemma2", "gemma3" (conversion/gemma.py): every norm written as 1 + w,
  gemma3_text        lm_head dropped (gemma, gemma2), their own set_gguf_parameters (soft caps,
                     sliding_window; gemma3: rope.freq_base_swa from rope_local_base_freq, no
                     sliding_window_pattern)
  phi3            -> "phi3" (conversion/phi.py Phi3MiniModel): qkv_proj and gate_up_proj kept fused,
                     rope_factors_long / _short tensors and rope.scaling.attn_factor for LongRoPE,
                     sliding_window 0 when none
Tensor names from gguf-py/gguf/tensor_mapping.py (model.layers.N.self_attn.q_proj -> blk.N.attn_q
...). Tensor types as ModelBase.prepare_tensors chooses them: 1-D tensors, *_norm.weight,
position_embd and anything not ending in ".weight" (the biases) in F32, the rest in the file type
(F32, F16, BF16 or Q8_0, quantized as gguf-py/gguf/quants.py does, bit for bit ggml's reference;
a row not a multiple of 32 falls back to F16). The tokenizer (a byte-level BPE tokenizer.json:
model "gpt2") as TextModel._set_vocab_gpt2 writes it: get_vocab_base's tokens and token types,
then gguf-py's SpecialVocab (merges, special token ids, add_*_token) when gguf-py is importable
(tests/goldens/llama_cpp.py gguf_py()), else the merges and config.json's *_token_id. (Gemma 1/2 and
Phi-3 are converted from a SentencePiece tokenizer.model, which the fixtures do not have: their
byte-level tokenizer.json is written the gpt2 way, pre "default".)

The other quantized types are made from these files by llama.cpp itself (quantize(): ctypes
llama_model_quantize, make_gguf_goldens.py).

  gguf_writer.py MODEL_DIR OUT.gguf [--type f32|f16|bf16|q8_0] [--pre NAME] [--split N]
  gguf_writer.py --self-test        (the bytes equal gguf-py's GGUFWriter's, when it is importable)
"""
import argparse
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import st  # noqa: E402

GGUF_MAGIC = 0x46554747  # "GGUF" little-endian
GGUF_VERSION = 3
ALIGNMENT = 32
QUANT_VERSION = 2  # gguf-py constants.py GGML_QUANT_VERSION

# gguf-py constants.py GGUFValueType
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_PACK = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
         UINT64: "<Q", INT64: "<q", FLOAT64: "<d", BOOL: "?"}

# ggml.h enum ggml_type (the ones written here) and llama.h enum llama_ftype
GGML = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}
FTYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
# gguf-py constants.py TokenType
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = range(1, 7)


# ------------------------------------------------------------------------------- tensor types
def np_roundf(n):
    """gguf-py quants.py np_roundf: round half away from zero (ggml's roundf)."""
    a = abs(n)
    floored = np.floor(a)
    return np.sign(n) * (floored + np.floor(2 * (a - floored)))


def to_bf16(x):
    """gguf-py quants.py BF16.quantize_blocks (ggml_compute_fp32_to_bf16): NaN quieted, nearest even."""
    n = x.astype(np.float32).view(np.uint32)
    n = np.where((n & 0x7fffffff) > 0x7f800000, (n & np.uint32(0xffff0000)) | np.uint32(64 << 16), n)
    n = (n.astype(np.uint64) + (0x7fff + ((n >> 16) & 1))) >> 16
    return n.astype(np.uint16)


def to_q8_0(x):
    """gguf-py quants.py Q8_0.quantize_blocks (ggml-quants.c quantize_row_q8_0_ref): per 32 values
    d = max|x| / 127 as f16, q = roundf(x / d) as int8; a block is d (2 bytes) then the 32 q."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, 0, 1 / d)
    qs = np_roundf(blocks * inv)
    return np.concatenate([d.astype(np.float16).view(np.uint8), qs.astype(np.int8).view(np.uint8)], axis=1)


def tensor_bytes(x, kind):
    """X (float32, numpy order) stored as KIND: (bytes, the ggml type actually used)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if kind == "q8_0" and x.shape[-1] % 32 != 0:  # gguf-py QuantError: convert falls back to F16
        kind = "f16"
    if kind == "f32":
        return x.tobytes(), GGML["f32"]
    if kind == "f16":
        return x.astype("<f2").tobytes(), GGML["f16"]
    if kind == "bf16":
        return to_bf16(x).astype("<u2").tobytes(), GGML["bf16"]
    if kind == "q8_0":
        return to_q8_0(x).tobytes(), GGML["q8_0"]
    raise ValueError(f"type {kind} is not written here (llama_model_quantize makes the others)")


# ----------------------------------------------------------------------------------- the file
def pack_value(value, vtype, sub=None):
    """gguf_writer.py GGUFWriter._pack_val, little-endian. An array's VALUE is its list of
    elements, of type SUB; an array of arrays lists (element type, elements) pairs."""
    if vtype in _PACK:
        return struct.pack(_PACK[vtype], value)
    if vtype == STRING:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return struct.pack("<Q", len(data)) + data
    if vtype == ARRAY:
        out = struct.pack("<IQ", sub, len(value))
        if sub in _PACK:
            return out + np.asarray(value, dtype=_PACK[sub]).tobytes()
        if sub == ARRAY:
            return out + b"".join(pack_value(items, ARRAY, item_sub) for item_sub, items in value)
        return out + b"".join(pack_value(item, sub) for item in value)
    raise ValueError(f"value type {vtype}")


class Writer:
    """Key/values and tensors, written as GGUFWriter writes them (keys in insertion order)."""

    def __init__(self, arch):
        self.arch = arch
        self.kv = {}
        self.tensors = []  # (name, numpy shape, ggml type, bytes)
        self.add("general.architecture", arch, STRING)

    def add(self, key, value, vtype, sub=None):
        self.kv[key] = (value, vtype, sub)

    def add_tensor(self, name, shape, ggml_type, data):
        self.tensors.append((name, tuple(int(d) for d in shape), ggml_type, data))

    @staticmethod
    def _pad(n):
        return -n % ALIGNMENT

    def file_bytes(self, tensors, kv):
        out = bytearray(struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(tensors), len(kv)))
        for key, (value, vtype, sub) in kv.items():
            out += pack_value(key, STRING) + struct.pack("<I", vtype) + pack_value(value, vtype, sub)
        offset = 0
        for name, shape, ggml_type, data in tensors:
            out += pack_value(name, STRING) + struct.pack("<I", len(shape))
            out += b"".join(struct.pack("<Q", d) for d in reversed(shape))
            out += struct.pack("<IQ", ggml_type, offset)
            offset += len(data) + self._pad(len(data))
        out += bytes(self._pad(len(out)))
        for _, _, _, data in tensors:
            out += data + bytes(self._pad(len(data)))
        return bytes(out)

    def write(self, path, split_max_tensors=0):
        """PATH, or with SPLIT_MAX_TENSORS the files PATH-0000k-of-0000N.gguf (the paths written)."""
        path = Path(path)
        if not split_max_tensors or len(self.tensors) <= split_max_tensors:
            path.write_bytes(self.file_bytes(self.tensors, self.kv))
            return [path]
        groups = [self.tensors[i:i + split_max_tensors] for i in range(0, len(self.tensors), split_max_tensors)]
        paths = []
        for i, group in enumerate(groups):  # GGUFWriter.add_shard_kv_data
            kv = dict(self.kv) if i == 0 else {}
            kv["split.no"] = (i, UINT16, None)
            kv["split.count"] = (len(groups), UINT16, None)
            kv["split.tensors.count"] = (len(self.tensors), INT32, None)
            p = path.with_name(f"{path.stem}-{i + 1:05d}-of-{len(groups):05d}.gguf")
            p.write_bytes(self.file_bytes(group, kv))
            paths.append(p)
        return paths


# ------------------------------------------------------------------------------ conventions
ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gpt2": "gpt2", "gemma": "gemma",
        "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3"}
GEMMAS = ("gemma", "gemma2", "gemma3_text")
PREFIXES = ("model.", "transformer.")
LLAMA_NAMES = {  # gguf-py tensor_mapping.py, after the layer stem layers.N. -> blk.N.
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",  # Phi-3's fused ones
}
SANDWICH_NAMES = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                  "post_feedforward_layernorm": "post_ffw_norm"}  # Gemma 2 and 3
GPT2_NAMES = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
              "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
OUTER = {"embed_tokens": "token_embd", "norm": "output_norm", "lm_head": "output", "wte": "token_embd",
         "wpe": "position_embd", "ln_f": "output_norm"}


def gguf_name(model_type, name):
    """The GGUF name of a Hugging Face tensor name (its model-class prefix removed)."""
    for prefix in PREFIXES:
        if name.startswith(prefix) and not name.startswith("lm_head"):
            name = name[len(prefix):]
    base, _, suffix = name.rpartition(".")
    parts = base.split(".")
    if parts[0] in ("layers", "h") and len(parts) > 2:
        table = GPT2_NAMES if model_type == "gpt2" else LLAMA_NAMES
        if model_type in ("gemma2", "gemma3_text"):
            table = {**table, **SANDWICH_NAMES}
        return f"blk.{parts[1]}.{table['.'.join(parts[2:])]}.{suffix}"
    return f"{OUTER[base]}.{suffix}"


def permute(w, n_head, n_head_kv):
    """conversion/llama.py LlamaModel.permute: each head's rows (2, P/2) -> (P/2, 2), for
    llama.cpp's rotary on adjacent pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg):
    """conversion/llama.py LlamaModel.generate_extra_tensors (float32 frequencies as torch computes
    them), or None without llama3 rope scaling."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if str(rope.get("rope_type", rope.get("type", ""))).lower() != "llama3":
        return None
    base = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(freq)
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def gemma_hparams(w, cfg, kind):
    """GemmaModel / Gemma2Model / Gemma3Model.set_gguf_parameters (conversion/gemma.py)."""
    a = w.arch
    if kind == "gemma3_text":
        text_hparams(w, dict(cfg, rope_parameters=None))
        if cfg.get("rope_local_base_freq") is not None:  # TextModel: rope.freq_base_swa
            w.add(f"{a}.rope.freq_base_swa", cfg["rope_local_base_freq"], FLOAT32)
        w.add(f"{a}.context_length", cfg.get("max_position_embeddings", 131072), UINT32)
        w.add(f"{a}.attention.head_count", cfg.get("num_attention_heads", 8), UINT32)
        w.add(f"{a}.attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6), FLOAT32)
        w.add(f"{a}.attention.key_length", cfg.get("head_dim", 256), UINT32)
        w.add(f"{a}.attention.value_length", cfg.get("head_dim", 256), UINT32)
        w.add(f"{a}.rope.freq_base", cfg.get("rope_theta", 1_000_000.0), FLOAT32)
        if cfg.get("final_logit_softcapping"):
            w.add(f"{a}.final_logit_softcapping", cfg["final_logit_softcapping"], FLOAT32)
        if cfg.get("sliding_window_pattern") != 1:
            w.add(f"{a}.attention.sliding_window", cfg["sliding_window"], UINT32)
        w.add(f"{a}.attention.head_count_kv", cfg.get("num_key_value_heads", 4), UINT32)
        return
    for key, value, vtype in (("context_length", cfg["max_position_embeddings"], UINT32),
                              ("embedding_length", cfg["hidden_size"], UINT32),
                              ("block_count", cfg["num_hidden_layers"], UINT32),
                              ("feed_forward_length", cfg["intermediate_size"], UINT32),
                              ("attention.head_count", cfg["num_attention_heads"], UINT32),
                              ("attention.head_count_kv", cfg.get("num_key_value_heads", cfg["num_attention_heads"]), UINT32),
                              ("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"], FLOAT32),
                              ("attention.key_length", cfg["head_dim"], UINT32),
                              ("attention.value_length", cfg["head_dim"], UINT32)):
        w.add(f"{a}.{key}", value, vtype)
    if kind == "gemma2":
        w.add(f"{a}.attn_logit_softcapping", cfg["attn_logit_softcapping"], FLOAT32)
        w.add(f"{a}.final_logit_softcapping", cfg["final_logit_softcapping"], FLOAT32)
        w.add(f"{a}.attention.sliding_window", cfg["sliding_window"], UINT32)


def phi3_hparams(w, cfg):
    """Phi3MiniModel.set_gguf_parameters and generate_extra_tensors' key (conversion/phi.py)."""
    a = w.arch
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    orig = rope.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
    rot = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    e, h = cfg["hidden_size"], cfg["num_attention_heads"]
    for key, value, vtype in (("context_length", cfg["max_position_embeddings"], UINT32),
                              ("rope.scaling.original_context_length", orig, UINT32),
                              ("embedding_length", e, UINT32), ("feed_forward_length", cfg["intermediate_size"], UINT32),
                              ("block_count", cfg["num_hidden_layers"], UINT32), ("attention.head_count", h, UINT32),
                              ("attention.head_count_kv", cfg["num_key_value_heads"], UINT32),
                              ("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"], FLOAT32),
                              ("rope.dimension_count", int(rot * e) // h, UINT32),
                              ("rope.freq_base", rope.get("rope_theta", cfg.get("rope_theta", 10000.0)), FLOAT32)):
        w.add(f"{a}.{key}", value, vtype)
    w.add("general.file_type_placeholder", 0, UINT32)  # keeps convert's key order: file_type comes here
    w.add(f"{a}.attention.sliding_window", cfg.get("sliding_window") or 0, UINT32)
    if rope.get("long_factor"):
        scale = cfg["max_position_embeddings"] / orig
        w.add(f"{a}.rope.scaling.attn_factor",
              math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0, FLOAT32)


def phi3_rope_factors(cfg):
    """Phi3MiniModel.generate_extra_tensors: (long, short) float32 factors, or None."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not rope.get("long_factor"):
        return None
    return np.array(rope["long_factor"], dtype=np.float32), np.array(rope["short_factor"], dtype=np.float32)


def hparams(w, cfg, kind):
    """TextModel.set_gguf_parameters, LlamaModel's and GPT2Model's additions."""
    if kind in GEMMAS:
        return gemma_hparams(w, cfg, kind)
    if kind == "phi3":
        return phi3_hparams(w, cfg)
    text_hparams(w, cfg) if kind != "gpt2" else gpt2_hparams(w, cfg)


def gpt2_hparams(w, cfg):
    """GPT2Model.set_gguf_parameters (conversion/gpt2.py)."""
    a = w.arch
    w.add(f"{a}.block_count", cfg["n_layer"], UINT32)
    w.add(f"{a}.context_length", cfg.get("n_ctx", cfg.get("n_positions", 1024)), UINT32)
    w.add(f"{a}.embedding_length", cfg["n_embd"], UINT32)
    w.add(f"{a}.feed_forward_length", 4 * cfg["n_embd"], UINT32)
    w.add(f"{a}.attention.head_count", cfg["n_head"], UINT32)
    w.add(f"{a}.attention.layer_norm_epsilon", cfg.get("layer_norm_epsilon", 1e-5), FLOAT32)


def text_hparams(w, cfg):
    """TextModel.set_gguf_parameters (conversion/base.py)."""
    a = w.arch
    w.add(f"{a}.block_count", cfg["num_hidden_layers"], UINT32)
    if "max_position_embeddings" in cfg:
        w.add(f"{a}.context_length", cfg["max_position_embeddings"], UINT32)
    w.add(f"{a}.embedding_length", cfg["hidden_size"], UINT32)
    w.add(f"{a}.feed_forward_length", cfg["intermediate_size"], UINT32)
    w.add(f"{a}.attention.head_count", cfg["num_attention_heads"], UINT32)
    if cfg.get("num_key_value_heads") is not None:
        w.add(f"{a}.attention.head_count_kv", cfg["num_key_value_heads"], UINT32)
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) == "linear" and rope.get("factor") is not None:
        w.add(f"{a}.rope.scaling.type", "linear", STRING)
        w.add(f"{a}.rope.scaling.factor", rope["factor"], FLOAT32)
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    if theta is not None:
        w.add(f"{a}.rope.freq_base", theta, FLOAT32)
    if cfg.get("rms_norm_eps") is not None:
        w.add(f"{a}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"], FLOAT32)
    if cfg.get("head_dim") is not None:
        w.add(f"{a}.attention.key_length", cfg["head_dim"], UINT32)
        w.add(f"{a}.attention.value_length", cfg["head_dim"], UINT32)


def read_checkpoint(model_dir):
    """name -> float32 numpy array of a folder's model.safetensors or shards."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for f in files:
        for name, array in st.read(model_dir / f).items():
            out[name] = array.astype(np.float32)
    return out


def read_bf16_exact(model_dir):
    """bf16 safetensors (st.py cannot read them): name -> float32 of the stored values, exactly."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for f in files:
        blob = (model_dir / f).read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        header.pop("__metadata__", None)
        for name, e in header.items():
            b, end = e["data_offsets"]
            raw = blob[8 + n + b:8 + n + end]
            if e["dtype"] == "BF16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                out[name] = bits.view(np.float32).reshape(e["shape"])
            else:
                out[name] = np.frombuffer(raw, dtype=st._DTYPES[e["dtype"]]).reshape(e["shape"]).astype(np.float32)
    return out


def tensors_of(model_dir, cfg):
    """The checkpoint's tensors, float32, bf16 upcast exactly."""
    try:
        return read_checkpoint(model_dir)
    except KeyError:
        return read_bf16_exact(model_dir)


def store_kind(name, ndim, ftype):
    """ModelBase.prepare_tensors: which type NAME is written in."""
    if ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or name.startswith("position_embd"):
        return "f32"
    return ftype


def converted_tensors(cfg, tensors):
    """(GGUF name, float32 array) in convert's order: the extra tensors, then the checkpoint's."""
    kind = cfg["model_type"]
    out = []
    if kind in ("llama", "mistral") and (factors := llama3_rope_factors(cfg)) is not None:
        out.append(("rope_freqs.weight", factors))
    if kind == "phi3" and (factors := phi3_rope_factors(cfg)) is not None:
        out += [("rope_factors_long.weight", factors[0]), ("rope_factors_short.weight", factors[1])]
    n_head = cfg.get("num_attention_heads")
    n_kv = cfg.get("num_key_value_heads") or n_head
    for name in sorted(tensors, key=lambda n: [int(p) if p.isdecimal() else p for p in n.split(".")]):
        if name.endswith((".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")):
            continue
        x = tensors[name]
        if kind in ("llama", "mistral"):
            if name.endswith(("q_proj.weight", "q_proj.bias")):
                x = permute(x, n_head, n_head)
            if name.endswith(("k_proj.weight", "k_proj.bias")):
                x = permute(x, n_head, n_kv)
        if kind == "gpt2" and name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
            x = x.T
        if kind in GEMMAS and name.endswith("norm.weight"):  # GemmaModel.modify_tensors: 1 + w
            x = x + np.float32(1)
        if kind in ("gemma", "gemma2") and name == "lm_head.weight":  # filter_tensors: not used
            continue
        out.append((gguf_name(kind, name), x))
    return out


# ------------------------------------------------------------------------------- the tokenizer
def vocab_base(model_dir, cfg):
    """TextModel.get_vocab_base without transformers: tokens and token types of tokenizer.json
    (vocab_size of them; a missing id is [PADn], UNUSED; an added token CONTROL when special or
    does_token_look_special, else USER_DEFINED)."""
    tok = json.loads((Path(model_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = dict(tok["model"]["vocab"])
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        vocab[a["content"]] = i
    size = cfg.get("vocab_size", len(vocab))
    reverse = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
            continue
        t = reverse[i]
        if i in added:
            looks = t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))
            types.append(TOKEN_CONTROL if added[i].get("special") or looks else TOKEN_USER_DEFINED)
            if types[-1] == TOKEN_USER_DEFINED:
                t = t.replace("\u2581", " ")
        else:
            types.append(TOKEN_NORMAL)
        tokens.append(t)
    return tokens, types, tok


def add_vocab(w, model_dir, cfg, pre):
    """TextModel._set_vocab_gpt2."""
    tokens, types, tok = vocab_base(model_dir, cfg)
    w.add("tokenizer.ggml.model", "gpt2", STRING)
    w.add("tokenizer.ggml.pre", pre, STRING)
    w.add("tokenizer.ggml.tokens", tokens, ARRAY, STRING)
    w.add("tokenizer.ggml.token_type", types, ARRAY, INT32)
    gguf = gguf_py()
    if gguf is not None:
        special = gguf.SpecialVocab(Path(model_dir), load_merges=True)
        special.add_to_gguf(_KvAdapter(w), quiet=True)
        return
    merges = tok["model"].get("merges", [])
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    if merges:
        w.add("tokenizer.ggml.merges", merges, ARRAY, STRING)
    for typ in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
        if isinstance(cfg.get(f"{typ}_token_id"), int):
            w.add(f"tokenizer.ggml.{typ}_token_id", cfg[f"{typ}_token_id"], UINT32)


class _KvAdapter:
    """The GGUFWriter methods SpecialVocab.add_to_gguf calls, onto a Writer."""

    def __init__(self, w):
        self.w = w

    def add_token_merges(self, merges):
        self.w.add("tokenizer.ggml.merges", list(merges), ARRAY, STRING)

    def add_chat_template(self, value):
        self.w.add("tokenizer.chat_template", value, STRING)

    def __getattr__(self, name):
        if name.startswith("add_add_") and name.endswith("_token"):
            key = f"tokenizer.ggml.add_{name[len('add_add_'):-len('_token')]}_token"
            return lambda value: self.w.add(key, bool(value), BOOL)
        if name.startswith("add_") and name.endswith("_token_id"):
            key = f"tokenizer.ggml.{name[len('add_'):]}"
            return lambda value: self.w.add(key, int(value), UINT32)
        if name in ("add_normalizer_lowercase", "add_normalizer_strip_accents"):
            return lambda value: None  # BERT-only keys: no tokenizer here sets them
        raise AttributeError(name)


def gguf_py():
    """llama.cpp's gguf package from the llama_cpp.py cache, when it is there (never installed)."""
    try:
        import llama_cpp
        path = llama_cpp.CACHE / "llama.cpp" / "gguf-py"
        if not path.is_dir():
            return None
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        import gguf
        return gguf
    except ImportError:
        return None


# ----------------------------------------------------------------------------------- convert
DEFAULT_PRE = {"llama": "llama-bpe", "mistral": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2", "gpt2": "gpt-2",
               "gemma": "default", "gemma2": "default", "gemma3_text": "default", "phi3": "default"}


def convert(model_dir, ftype="f32", pre=None, name=None, vocab=True):
    """A Writer holding MODEL_DIR as convert_hf_to_gguf.py --outtype FTYPE writes it."""
    model_dir = Path(model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    kind = cfg["model_type"]
    if kind not in ARCH:
        raise ValueError(f"model_type {kind} has no GGUF form here (one of {', '.join(ARCH)})")
    w = Writer(ARCH[kind])
    converted = converted_tensors(cfg, tensors_of(model_dir, cfg))
    w.add("general.type", "model", STRING)
    w.add("general.name", name or model_dir.name, STRING)
    hparams(w, cfg, kind)
    if kind in ("llama", "mistral"):  # LlamaModel.set_gguf_parameters
        w.add(f"{w.arch}.vocab_size", cfg["vocab_size"], UINT32)
        w.add(f"{w.arch}.rope.dimension_count", cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
              UINT32)
    if "general.file_type_placeholder" in w.kv:  # phi3 writes file_type among its keys
        w.kv = {("general.file_type" if k == "general.file_type_placeholder" else k):
                ((FTYPE[ftype], UINT32, None) if k == "general.file_type_placeholder" else v) for k, v in w.kv.items()}
    else:
        w.add("general.file_type", FTYPE[ftype], UINT32)
    w.add("general.quantization_version", QUANT_VERSION, UINT32)
    if vocab:
        add_vocab(w, model_dir, cfg, pre or DEFAULT_PRE[kind])
    for gname, x in converted:
        data, ggml_type = tensor_bytes(x, store_kind(gname, x.ndim, ftype))
        w.add_tensor(gname, x.shape, ggml_type, data)
    return w


def self_test():
    """Every fixture this module converts, in every type, byte for byte as gguf-py's GGUFWriter
    writes the same key/values and tensors (its quantization included)."""
    gguf = gguf_py()
    if gguf is None:
        print("SKIP: gguf-py is not in the llama_cpp.py cache")
        return 0
    import tempfile
    models = Path(__file__).resolve().parents[1] / "fixtures" / "models"
    checked = 0
    for case in ("full_llama", "full_qwen2", "full_qwen3", "full_gpt2", "full_mistral", "full_llama_tied", "full_gemma",
                 "full_gemma2", "full_gemma3", "full_phi3"):
        for ftype in ("f32", "f16", "bf16", "q8_0"):
            w = convert(models / case, ftype)
            with tempfile.TemporaryDirectory() as d:
                ref = gguf.GGUFWriter(Path(d) / "ref.gguf", w.arch)
                for key, (value, vtype, sub) in list(w.kv.items())[1:]:
                    ref.add_key_value(key, value, gguf.GGUFValueType(vtype), None if sub is None else gguf.GGUFValueType(sub))
                for gname, x in converted_tensors(json.loads((models / case / "config.json").read_text()),
                                                  tensors_of(models / case, None)):
                    kind = store_kind(gname, x.ndim, ftype)
                    if kind == "q8_0" and x.shape[-1] % 32:
                        kind = "f16"
                    qtype = getattr(gguf.GGMLQuantizationType, kind.upper())
                    data = gguf.quants.quantize(x, qtype)
                    ref.add_tensor(gname, data, raw_dtype=qtype)
                ref.write_header_to_file()
                ref.write_kv_data_to_file()
                ref.write_tensors_to_file()
                ref.close()
                want = (Path(d) / "ref.gguf").read_bytes()
            got = w.file_bytes(w.tensors, w.kv)
            if got != want:
                at = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else "size"
                print(f"FAIL {case} {ftype}: differs from gguf-py's GGUFWriter at byte {at}")
                return 1
            checked += 1
    print(f"gguf_writer.py: {checked} files equal gguf-py's GGUFWriter byte for byte")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", nargs="?")
    p.add_argument("out", nargs="?")
    p.add_argument("--type", default="f32", choices=sorted(FTYPE))
    p.add_argument("--pre", default=None, help="tokenizer.ggml.pre (default: the family's llama.cpp name)")
    p.add_argument("--split", type=int, default=0, help="at most this many tensors per file")
    p.add_argument("--no-vocab", action="store_true")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        return self_test()
    if not a.model or not a.out:
        p.error("MODEL_DIR and OUT.gguf are required")
    for path in convert(a.model, a.type, a.pre, vocab=not a.no_vocab).write(a.out, a.split):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
