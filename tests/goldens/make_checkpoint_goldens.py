#!/usr/bin/python3
"""Tiny Hugging Face checkpoints and the goldens of one attention layer, `attntrace mha --model DIR`.

Run:  /usr/bin/python3 tests/goldens/make_checkpoint_goldens.py   (rewrites tests/fixtures/models/)

A TRANSCRIPTION, NOT transformers ITSELF: transformers could not be installed where this ran (no
PyPI, no device machine in that session), so the expected values come from hf_attention.py, a
line-by-line float64 transcription into PyTorch 1.13 of the eager attention of
huggingface/transformers' modeling_gpt2.py, modeling_bert.py, modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py, modeling_gpt_neox.py, modeling_bloom.py,
modeling_rope_utils.py and masking_utils.py (each function there cites the one it transcribes). The
checkpoints are written the way save_pretrained writes them (config.json keys of that family,
state-dict names with the model class's prefix, model.safetensors or shards plus
model.safetensors.index.json), so where transformers is installed the same folders load with
AutoModel*.from_pretrained(DIR, attn_implementation="eager") and can be checked against
output_attentions / a forward hook on the attention module.

Cases (CASES below): gpt2, bert (BertForMaskedLM names) and bert_mask (BertModel names, padding
mask), llama (GQA, rope_scaling llama3), llama_linear (rope_parameters linear, transformers 5
style, o_proj bias), mistral (sliding_window 3 < L, sharded in two files mid-layer), qwen2 (q/k/v
biases, sliding_window set but use_sliding_window false), qwen3 (q_norm/k_norm, head_dim != E/H),
gpt_neox (rotary_pct 0.25), bloom (ALiBi, 6 heads); in float32, and gpt2, llama, bloom also in
bf16, gpt_neox in f16. The goldens use the weights as stored (bf16/f16 upcast exactly), in float64.

Every golden is checked here two ways: against an independent numpy reference (explicit weight
slicing, rotary as complex rotation of the pairs (i, i + d/2), ALiBi in the paper's relative form
-(i - j) * slope, masks as booleans, GQA by index h // (H/G); reference.masked_softmax_attention),
and for gpt2, bert and bloom also against torch.nn.MultiheadAttention with reshaped weights; rows of
the weights sum to 1 and masked entries are exactly 0.

Layout, per case directory tests/fixtures/models/<case>/:
  config.json, model.safetensors (or model-0000K-of-00002.safetensors + model.safetensors.index.json)
  golden/hidden_L{N}.npy     (B=2, L=7, E) float32, the residual stream entering layer N
  golden/normed_L{N}.npy     (B, L, E) float64, after the pre-attention norm (not for bert)
  golden/q_rotary_L{N}.npy   (B, H, L, P) float64, queries after the rotary (rotary families)
  golden/k_rotary_L{N}.npy   (B, G, L, P) float64, keys after the rotary (before repeat_kv)
  golden/weights_L{N}.npy    (B, H, L, L) float64, output_attentions[N] with eager attention
  golden/output_L{N}.npy     (B, L, E) float64, the attention module's output after its output
                             projection, before the residual add
  golden/attention_mask.npy  (B, L) int64, HF attention_mask (1 = keep), bert_mask only
  golden/key_padding_mask.npy (B, L) bool, the same as attntrace's --key-padding-mask (true = ignore)
tests/fixtures/models/cases.json lists every (case, layer) with its files and the semantics used.
"""
import json
import math
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_attention as hf  # noqa: E402
import reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "models"
B, L, V = 2, 7, 64
TOL = dict(rtol=1e-9, atol=1e-10)  # transcription vs independent references, both float64

# ------------------------------------------------------------------------------ safetensors I/O
_CODE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
_TORCH = {code: dt for dt, code in _CODE.items()}


def _raw(t):
    """A tensor's little-endian bytes (bf16 through its int16 bit pattern)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().tobytes()
    return t.contiguous().numpy().tobytes()


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor. Name order, __metadata__ {"format": "pt"}, header padded to 8."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        blob = _raw(tensors[name])
        header[name] = {"dtype": _CODE[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """name -> float64 tensor, upcast exactly from F32 / BF16 / F16."""
    blob = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        lo, hi = (8 + n + o for o in e["data_offsets"])
        dt = _TORCH[e["dtype"]]
        raw = torch.frombuffer(bytearray(blob[lo:hi]), dtype=torch.int16 if dt == torch.bfloat16 else dt)
        out[name] = (raw.view(dt) if dt == torch.bfloat16 else raw).to(torch.float64).reshape(e["shape"])
    return out


def read_checkpoint(folder):
    """All tensors of a checkpoint folder (single file or the shards of its index)."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
        else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(read_safetensors(folder / f))
    return out


def save_checkpoint(folder, tensors, shard_before=None):
    """model.safetensors, or two shards split before the name SHARD_BEFORE (sorted order, as
    huggingface_hub's split_torch_state_dict_into_shards fills shards in order; a layer may span
    both) and model.safetensors.index.json {"metadata": {"total_size"}, "weight_map"}."""
    if shard_before is None:
        write_safetensors(folder / "model.safetensors", tensors)
        return
    names = sorted(tensors)
    parts = [[n for n in names if n < shard_before], [n for n in names if n >= shard_before]]
    weight_map = {}
    for i, part in enumerate(parts, start=1):
        fname = f"model-{i:05d}-of-{len(parts):05d}.safetensors"
        write_safetensors(folder / fname, {n: tensors[n] for n in part})
        weight_map.update({n: fname for n in part})
    total = sum(len(_raw(t)) for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


# ------------------------------------------------------------------------ random tiny state dicts
class Init:
    """Seeded float32 tensors: weights N(0, 0.2^2), biases N(0, 0.1^2), norm gains 1 + N(0, 0.1^2)."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def w(self, *shape, scale=0.2):
        return torch.randn(*shape, generator=self.g) * scale

    def bias(self, n):
        return self.w(n, scale=0.1)

    def gain(self, n):
        return 1.0 + self.w(n, scale=0.1)


def add_linear(sd, init, name, out_f, in_f, bias=True):
    """nn.Linear name.weight (out, in) [+ name.bias (out,)]."""
    sd[name + ".weight"] = init.w(out_f, in_f)
    if bias:
        sd[name + ".bias"] = init.bias(out_f)


def add_layer_norm(sd, init, name, n):
    sd[name + ".weight"], sd[name + ".bias"] = init.gain(n), init.bias(n)


def gpt2_state(cfg, init, prefix):
    """GPT2Model / GPT2LMHeadModel names (the tied lm_head is not saved). Conv1D weights (in, out)."""
    e, sd = cfg["n_embd"], {}
    sd[prefix + "wte.weight"], sd[prefix + "wpe.weight"] = init.w(V, e), init.w(cfg["n_positions"], e)
    for i in range(cfg["n_layer"]):
        p = f"{prefix}h.{i}."
        add_layer_norm(sd, init, p + "ln_1", e)
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = init.w(e, 3 * e), init.bias(3 * e)
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = init.w(e, e), init.bias(e)
        add_layer_norm(sd, init, p + "ln_2", e)
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = init.w(e, 4 * e), init.bias(4 * e)
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = init.w(4 * e, e), init.bias(e)
    add_layer_norm(sd, init, prefix + "ln_f", e)
    return sd


def bert_state(cfg, init, prefix):
    """BertModel names (prefix "", with the pooler) or BertForMaskedLM (prefix "bert.", cls head)."""
    e, inter, sd = cfg["hidden_size"], cfg["intermediate_size"], {}
    sd[prefix + "embeddings.word_embeddings.weight"] = init.w(V, e)
    sd[prefix + "embeddings.position_embeddings.weight"] = init.w(cfg["max_position_embeddings"], e)
    sd[prefix + "embeddings.token_type_embeddings.weight"] = init.w(cfg["type_vocab_size"], e)
    add_layer_norm(sd, init, prefix + "embeddings.LayerNorm", e)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layer.{i}."
        for name in ("query", "key", "value"):
            add_linear(sd, init, p + "attention.self." + name, e, e)
        add_linear(sd, init, p + "attention.output.dense", e, e)
        add_layer_norm(sd, init, p + "attention.output.LayerNorm", e)
        add_linear(sd, init, p + "intermediate.dense", inter, e)
        add_linear(sd, init, p + "output.dense", e, inter)
        add_layer_norm(sd, init, p + "output.LayerNorm", e)
    if prefix:
        sd["cls.predictions.bias"] = init.bias(V)
        add_linear(sd, init, "cls.predictions.transform.dense", e, e)
        add_layer_norm(sd, init, "cls.predictions.transform.LayerNorm", e)
    else:
        add_linear(sd, init, "pooler.dense", e, e)
    return sd


def llama_state(cfg, init, prefix="model."):
    """LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM names."""
    e, inter = cfg["hidden_size"], cfg["intermediate_size"]
    h, g = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    p_dim, kind, sd = cfg.get("head_dim") or e // h, cfg["model_type"], {}
    qkv_bias = kind == "qwen2" or cfg.get("attention_bias", False)
    o_bias = kind != "qwen2" and cfg.get("attention_bias", False)
    sd[prefix + "embed_tokens.weight"] = init.w(V, e)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}layers.{i}."
        sd[p + "input_layernorm.weight"] = init.gain(e)
        add_linear(sd, init, p + "self_attn.q_proj", h * p_dim, e, qkv_bias)
        add_linear(sd, init, p + "self_attn.k_proj", g * p_dim, e, qkv_bias)
        add_linear(sd, init, p + "self_attn.v_proj", g * p_dim, e, qkv_bias)
        add_linear(sd, init, p + "self_attn.o_proj", e, h * p_dim, o_bias)
        if kind == "qwen3":
            sd[p + "self_attn.q_norm.weight"], sd[p + "self_attn.k_norm.weight"] = init.gain(p_dim), init.gain(p_dim)
        sd[p + "post_attention_layernorm.weight"] = init.gain(e)
        add_linear(sd, init, p + "mlp.gate_proj", inter, e, False)
        add_linear(sd, init, p + "mlp.up_proj", inter, e, False)
        add_linear(sd, init, p + "mlp.down_proj", e, inter, False)
    sd[prefix + "norm.weight"] = init.gain(e)
    if not cfg.get("tie_word_embeddings", False):
        sd["lm_head.weight"] = init.w(V, e)
    return sd


def gpt_neox_state(cfg, init, prefix="gpt_neox."):
    """GPTNeoXForCausalLM names; query_key_value rows are per head [q (P), k (P), v (P)]."""
    e, inter, sd = cfg["hidden_size"], cfg["intermediate_size"], {}
    sd[prefix + "embed_in.weight"] = init.w(V, e)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}layers.{i}."
        add_layer_norm(sd, init, p + "input_layernorm", e)
        add_layer_norm(sd, init, p + "post_attention_layernorm", e)
        add_linear(sd, init, p + "attention.query_key_value", 3 * e, e, cfg["attention_bias"])
        add_linear(sd, init, p + "attention.dense", e, e, cfg["attention_bias"])
        add_linear(sd, init, p + "mlp.dense_h_to_4h", inter, e)
        add_linear(sd, init, p + "mlp.dense_4h_to_h", e, inter)
    add_layer_norm(sd, init, prefix + "final_layer_norm", e)
    sd["embed_out.weight"] = init.w(V, e)
    return sd


def bloom_state(cfg, init, prefix):
    """BloomModel (prefix "") or BloomForCausalLM (prefix "transformer.", tied lm_head not saved);
    query_key_value rows are per head [q (P), k (P), v (P)]."""
    e, sd = cfg["hidden_size"], {}
    sd[prefix + "word_embeddings.weight"] = init.w(V, e)
    add_layer_norm(sd, init, prefix + "word_embeddings_layernorm", e)
    for i in range(cfg["n_layer"]):
        p = f"{prefix}h.{i}."
        add_layer_norm(sd, init, p + "input_layernorm", e)
        add_linear(sd, init, p + "self_attention.query_key_value", 3 * e, e)
        add_linear(sd, init, p + "self_attention.dense", e, e)
        add_layer_norm(sd, init, p + "post_attention_layernorm", e)
        add_linear(sd, init, p + "mlp.dense_h_to_4h", 4 * e, e)
        add_linear(sd, init, p + "mlp.dense_4h_to_h", e, 4 * e)
    add_layer_norm(sd, init, prefix + "ln_f", e)
    return sd


def norm_weight(init, n, gemma):
    """A norm's stored weight: Gemma's RMSNorm multiplies by (1 + w), so its weights centre on 0."""
    return init.w(n, scale=0.1) if gemma else init.gain(n)


def gated_mlp(sd, init, stem, e, inter, names=("gate_proj", "up_proj", "down_proj")):
    add_linear(sd, init, stem + names[0], inter, e, False)
    add_linear(sd, init, stem + names[1], inter, e, False)
    add_linear(sd, init, stem + names[2], e, inter, False)


def new_family_state(cfg, init, prefix="model."):
    """Gemma / Gemma2 / Gemma3ForCausalLM, Phi3ForCausalLM, Olmo2ForCausalLM, MixtralForCausalLM,
    Qwen2MoeForCausalLM, Qwen3MoeForCausalLM and OlmoeForCausalLM names, as the hub's checkpoints
    hold them (one tensor per expert: block_sparse_moe.experts.J.w1 / w3 / w2 for Mixtral,
    mlp.experts.J.gate_proj / up_proj / down_proj for the others)."""
    kind = cfg["model_type"]
    e, h = cfg["hidden_size"], cfg["num_attention_heads"]
    g = cfg.get("num_key_value_heads") or h
    p_dim = cfg.get("head_dim") or e // h
    gemma = kind.startswith("gemma")
    sd = {prefix + "embed_tokens.weight": init.w(V, e)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}layers.{i}."
        if kind != "olmo2":
            sd[p + "input_layernorm.weight"] = norm_weight(init, e, gemma)
        bias = cfg.get("attention_bias", False)
        qkv_bias = cfg.get("qkv_bias", True) if kind == "qwen2_moe" else bias
        if kind == "phi3":
            add_linear(sd, init, p + "self_attn.qkv_proj", (h + 2 * g) * p_dim, e, False)
        else:
            add_linear(sd, init, p + "self_attn.q_proj", h * p_dim, e, qkv_bias)
            add_linear(sd, init, p + "self_attn.k_proj", g * p_dim, e, qkv_bias)
            add_linear(sd, init, p + "self_attn.v_proj", g * p_dim, e, qkv_bias)
        add_linear(sd, init, p + "self_attn.o_proj", e, h * p_dim, bias and kind != "qwen2_moe")
        if kind in ("gemma3_text", "qwen3_moe"):
            sd[p + "self_attn.q_norm.weight"] = norm_weight(init, p_dim, gemma)
            sd[p + "self_attn.k_norm.weight"] = norm_weight(init, p_dim, gemma)
        if kind in ("olmo2", "olmoe"):
            sd[p + "self_attn.q_norm.weight"], sd[p + "self_attn.k_norm.weight"] = init.gain(h * p_dim), init.gain(g * p_dim)
        sd[p + "post_attention_layernorm.weight"] = norm_weight(init, e, gemma)
        if kind in ("gemma2", "gemma3_text"):
            sd[p + "pre_feedforward_layernorm.weight"] = norm_weight(init, e, gemma)
        if kind in ("gemma2", "gemma3_text", "olmo2"):
            sd[p + "post_feedforward_layernorm.weight"] = norm_weight(init, e, gemma)
        moe_layer_state(sd, init, cfg, p, i)
    sd[prefix + "norm.weight"] = norm_weight(init, e, gemma)
    if not cfg.get("tie_word_embeddings", gemma):
        sd["lm_head.weight"] = init.w(V, e)
    return sd


def moe_layer_state(sd, init, cfg, p, i):
    """Layer I's MLP: Phi-3's gate_up_proj, a MoE layer's router, experts and shared expert, or a
    dense gated MLP."""
    kind, e = cfg["model_type"], cfg["hidden_size"]
    if kind == "phi3":
        add_linear(sd, init, p + "mlp.gate_up_proj", 2 * cfg["intermediate_size"], e, False)
        add_linear(sd, init, p + "mlp.down_proj", e, cfg["intermediate_size"], False)
        return
    only, step = cfg.get("mlp_only_layers") or [], cfg.get("decoder_sparse_step", 1)
    if kind not in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe") or i in only or (i + 1) % step:
        gated_mlp(sd, init, p + "mlp.", e, cfg["intermediate_size"])
        return
    stem = p + ("block_sparse_moe." if kind == "mixtral" else "mlp.")
    experts = cfg.get("num_local_experts", cfg.get("num_experts"))
    inter = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    add_linear(sd, init, stem + "gate", experts, e, False)
    for j in range(experts):
        gated_mlp(sd, init, f"{stem}experts.{j}.", e, inter, ("w1", "w3", "w2") if kind == "mixtral" else
                  ("gate_proj", "up_proj", "down_proj"))
    if kind == "qwen2_moe":
        gated_mlp(sd, init, p + "mlp.shared_expert.", e, cfg["shared_expert_intermediate_size"])
        add_linear(sd, init, p + "mlp.shared_expert_gate", 1, e, False)


def layer_prefix(kind, prefix, n):
    """The name prefix of layer N's tensors."""
    body = {"gpt2": "h", "bloom": "h", "bert": "encoder.layer", "gpt_neox": "layers"}.get(kind, "layers")
    return f"{prefix}{body}.{n}."


# ---------------------------------------------------------------------------------- config.json
def dtype_key(cfg, dtype, new_style=False):
    """save_pretrained writes "torch_dtype" (transformers 4.x) or "dtype" (5.x)."""
    cfg["dtype" if new_style else "torch_dtype"] = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[dtype]
    return cfg


def gpt2_config(dtype):
    return dtype_key({
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": V - 1, "embd_pdrop": 0.1, "eos_token_id": V - 1, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_inner": None,
        "n_layer": 3, "n_positions": 16, "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
        "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
        "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True, "transformers_version": "4.46.3",
        "use_cache": True, "vocab_size": V}, dtype)


def bert_config(dtype, architecture):
    return dtype_key({
        "architectures": [architecture], "attention_probs_dropout_prob": 0.1, "classifier_dropout": None,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32, "initializer_range": 0.02,
        "intermediate_size": 64, "layer_norm_eps": 1e-12, "max_position_embeddings": 16,
        "model_type": "bert", "num_attention_heads": 4, "num_hidden_layers": 3, "pad_token_id": 0,
        "position_embedding_type": "absolute", "transformers_version": "4.46.3", "type_vocab_size": 2,
        "use_cache": True, "vocab_size": V}, dtype)


def decoder_config(kind, dtype, heads, kv_heads, **extra):
    """Llama-style config; EXTRA adds or overrides keys (None values are written as null)."""
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM"}[kind]
    cfg = {"architectures": [arch], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
           "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64,
           "max_position_embeddings": 256, "model_type": kind, "num_attention_heads": heads,
           "num_hidden_layers": 3, "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-05,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "transformers_version": "4.46.3",
           "use_cache": True, "vocab_size": V}
    cfg.update(extra)
    return dtype_key(cfg, dtype, new_style="rope_parameters" in cfg)


def llama_config(dtype):
    """Llama 3.1 style: old-style rope_scaling llama3 beside a top-level rope_theta."""
    return decoder_config("llama", dtype, 4, 2, attention_bias=False, head_dim=8, mlp_bias=False,
                          pretraining_tp=1, rope_scaling={
                              "factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 64, "rope_type": "llama3"})


def llama_linear_config(dtype):
    """transformers 5 style: rope_parameters (no rope_theta / rope_scaling keys), "dtype"; with
    attention_bias so o_proj has a bias too."""
    cfg = decoder_config("llama", dtype, 4, 2, attention_bias=True, head_dim=8, mlp_bias=False,
                         pretraining_tp=1, transformers_version="5.0.0",
                         rope_parameters={"factor": 2.0, "rope_theta": 10000.0, "rope_type": "linear"})
    del cfg["rope_theta"]
    return cfg


def mistral_config(dtype):
    return decoder_config("mistral", dtype, 4, 1, head_dim=8, sliding_window=3)


def qwen2_config(dtype):
    """As Qwen2.5 hub configs: a sliding_window number with use_sliding_window false (disabled)."""
    return decoder_config("qwen2", dtype, 4, 2, max_window_layers=1, rms_norm_eps=1e-06,
                          rope_scaling=None, rope_theta=1000000.0, sliding_window=4,
                          tie_word_embeddings=True, use_sliding_window=False)


def qwen3_config(dtype):
    """As Qwen3 hub configs, head_dim (16) != hidden_size / heads (8)."""
    return decoder_config("qwen3", dtype, 4, 2, attention_bias=False, head_dim=16,
                          layer_types=["full_attention"] * 3, max_window_layers=3, rms_norm_eps=1e-06,
                          rope_scaling=None, rope_theta=1000000.0, sliding_window=None,
                          tie_word_embeddings=True, transformers_version="4.56.0", use_sliding_window=False)


def gpt_neox_config(dtype):
    return dtype_key({
        "architectures": ["GPTNeoXForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
        "bos_token_id": 0, "classifier_dropout": 0.1, "eos_token_id": 0, "hidden_act": "gelu",
        "hidden_dropout": 0.0, "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 128,
        "layer_norm_eps": 1e-05, "max_position_embeddings": 256, "model_type": "gpt_neox",
        "num_attention_heads": 2, "num_hidden_layers": 3, "rope_scaling": None, "rotary_emb_base": 10000,
        "rotary_pct": 0.25, "tie_word_embeddings": False, "transformers_version": "4.46.3",
        "use_cache": True, "use_parallel_residual": True, "vocab_size": V}, dtype)


def new_config(kind, dtype, **extra):
    """A tiny config of one of issue 36's families, keys as their hub configs spell them (E 32, 4
    heads sharing 2 kv heads of 8, MLP 64, 3 layers); EXTRA adds or overrides keys."""
    arch = {"gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
            "phi3": "Phi3ForCausalLM", "olmo2": "Olmo2ForCausalLM", "mixtral": "MixtralForCausalLM",
            "qwen2_moe": "Qwen2MoeForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM"}[kind]
    cfg = {"architectures": [arch], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
           "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 256,
           "model_type": kind, "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "transformers_version": "4.53.0", "use_cache": True,
           "vocab_size": V}
    if kind.startswith("gemma"):
        cfg.update(head_dim=8, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)
    else:
        cfg.update(hidden_act="silu", tie_word_embeddings=False)
    cfg.update(extra)
    return dtype_key(cfg, dtype)


def gemma2_config(dtype):
    """Soft-capping 3.0 (the tiny scores reach it), window 3 on the even layers, query_pre_attn_scalar
    16 (not P = 8)."""
    return new_config("gemma2", dtype, attn_logit_softcapping=3.0, final_logit_softcapping=5.0,
                      query_pre_attn_scalar=16, sliding_window=3, cache_implementation="hybrid")


def gemma3_config(dtype):
    """As gemma-3 hub configs: sliding_window_pattern 2 (layers 0 and 2 local), rope_local_base_freq
    for them, rope_theta + linear rope_scaling for the global layer, q_norm / k_norm."""
    return new_config("gemma3_text", dtype, query_pre_attn_scalar=8, sliding_window=4, sliding_window_pattern=2,
                      rope_local_base_freq=10000.0, rope_theta=1000000.0,
                      rope_scaling={"factor": 8.0, "rope_type": "linear"}, final_logit_softcapping=None,
                      attn_logit_softcapping=None)


def phi3_config(dtype):
    """LongRoPE (Phi-3-mini-128k style: max 256 over an original 4, so the long factors and the
    attention factor apply at L = 7), partial_rotary_factor 0.5 (4 of 8 dims), sliding_window 5."""
    return new_config("phi3", dtype, original_max_position_embeddings=4, partial_rotary_factor=0.5,
                      sliding_window=5, rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5],
                                                      "long_factor": [2.0, 6.0]})


def bloom_config(dtype):
    """6 heads: not a power of two, so build_alibi_tensor's extra slopes are used."""
    return dtype_key({
        "apply_residual_connection_post_layernorm": False, "architectures": ["BloomForCausalLM"],
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0,
        "hidden_size": 36, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "bloom",
        "n_head": 6, "n_layer": 3, "pad_token_id": 3, "pretraining_tp": 1, "slow_but_exact": False,
        "transformers_version": "4.46.3", "use_cache": True, "vocab_size": V}, dtype)


# ------------------------------------------------------------ independent numpy reference
def np_layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def np_rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_inv_freq(rope, dim):
    """(dim/2,) frequencies band by band (llama3: keep above high_freq_wavelen... see Meta's
    apply_scaling), written independently of hf_attention.inv_freq."""
    out = []
    for i in range(dim // 2):
        f = rope["theta"] ** (-2.0 * i / dim)
        if rope.get("type") == "linear":
            f /= rope["factor"]
        elif rope.get("type") == "llama3":
            wavelen, orig = 2 * math.pi / f, rope["orig"]
            if wavelen > orig / rope["low"]:
                f /= rope["factor"]
            elif wavelen >= orig / rope["high"]:
                s = (orig / wavelen - rope["low"]) / (rope["high"] - rope["low"])
                f = (1 - s) * f / rope["factor"] + s * f
        out.append(f)
    return np.array(out)


def np_rotary(x, freqs):
    """x (B, heads, L, P): the pairs (i, i + d/2) of the first d = 2*len(freqs) dims as complex
    numbers, multiplied by exp(1j * position * freq); the other dims unchanged."""
    half = len(freqs)
    z = x[..., :half] + 1j * x[..., half:2 * half]
    z = z * np.exp(1j * np.arange(x.shape[-2])[:, None] * freqs[None, :])
    return np.concatenate([z.real, z.imag, x[..., 2 * half:]], axis=-1)


def np_heads(y, p):
    """(B, L, n*p) -> (B, n, L, p)."""
    return y.reshape(y.shape[0], y.shape[1], -1, p).transpose(0, 2, 1, 3)


def np_attend(q, k, v, allowed=None, additive=None):
    """GQA by index: query head h reads kv head h // (H/G). -> context (B, L, H*P), weights."""
    idx = np.arange(q.shape[1]) // (q.shape[1] // k.shape[1])
    ctx, w = reference.masked_softmax_attention(q, k[:, idx], v[:, idx], q.shape[-1] ** -0.5, allowed, additive)
    return ctx.transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[2], -1), w


def np_unfuse(w, h, p):
    """Fused per-head [q; k; v] rows (3*H*P, ...) -> the q, k, v rows (H*P, ...) each."""
    w = w.reshape(h, 3, p, *w.shape[1:])
    return [w[:, i].reshape(h * p, *w.shape[3:]) for i in range(3)]


def numpy_reference(spec, t, cfg, x, mask):
    """The stages of hf_attention's families, computed independently in numpy.
    -> normed, q_rotary, k_rotary, weights, output (None where the family has no such stage), v."""
    kind, s = spec["kind"], spec["semantics"]
    h, p = s["heads"], s["head_dim"]
    length = x.shape[1]
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = (j <= i) if s["causal"] else None
    if s["window"] is not None:
        allowed = allowed & (j > i - s["window"])
    additive, normed, qr, kr = None, None, None, None
    if kind == "gpt2":
        normed = np_layer_norm(x, t["ln_1.weight"], t["ln_1.bias"], s["norm_eps"])
        w, bias, e = t["attn.c_attn.weight"], t["attn.c_attn.bias"], x.shape[2]
        q, k, v = (np_heads(normed @ w[:, c * e:(c + 1) * e] + bias[c * e:(c + 1) * e], p) for c in range(3))
        ctx, weights = np_attend(q, k, v, allowed)
        return normed, qr, kr, weights, ctx @ t["attn.c_proj.weight"] + t["attn.c_proj.bias"], v
    if kind == "bert":
        q, k, v = (np_heads(x @ t[f"attention.self.{n}.weight"].T + t[f"attention.self.{n}.bias"], p)
                   for n in ("query", "key", "value"))
        keep = None if mask is None else mask.astype(bool)[:, None, None, :]
        ctx, weights = np_attend(q, k, v, keep)
        return normed, qr, kr, weights, ctx @ t["attention.output.dense.weight"].T + t["attention.output.dense.bias"], v
    if kind in ("gpt_neox", "bloom"):
        pre = "attention." if kind == "gpt_neox" else "self_attention."
        normed = np_layer_norm(x, t["input_layernorm.weight"], t["input_layernorm.bias"], s["norm_eps"])
        ws = np_unfuse(t[pre + "query_key_value.weight"], h, p)
        bs = np_unfuse(t[pre + "query_key_value.bias"], h, p)
        q, k, v = (np_heads(normed @ w.T + b, p) for w, b in zip(ws, bs))
        if kind == "bloom":
            additive = -(i - j)[None, None] * np.array(s["alibi_slopes"])[None, :, None, None]
        else:
            q, k = qr, kr = np_rotary(q, np.array(s["inv_freq"])), np_rotary(k, np.array(s["inv_freq"]))
        ctx, weights = np_attend(q, k, v, allowed, additive)
        return normed, qr, kr, weights, ctx @ t[pre + "dense.weight"].T + t[pre + "dense.bias"], v
    normed = np_rms_norm(x, t["input_layernorm.weight"], s["norm_eps"])
    proj = {n: normed @ t[f"self_attn.{n}_proj.weight"].T + t.get(f"self_attn.{n}_proj.bias", 0.0) for n in "qkv"}
    q, k, v = (np_heads(proj[n], p) for n in "qkv")
    if s["qk_norm"]:
        q = np_rms_norm(q, t["self_attn.q_norm.weight"], s["norm_eps"])
        k = np_rms_norm(k, t["self_attn.k_norm.weight"], s["norm_eps"])
    qr, kr = np_rotary(q, np.array(s["inv_freq"])), np_rotary(k, np.array(s["inv_freq"]))
    ctx, weights = np_attend(qr, kr, v, allowed)
    return normed, qr, kr, weights, ctx @ t["self_attn.o_proj.weight"].T + t.get("self_attn.o_proj.bias", 0.0), v


NEW_KINDS = ("gemma", "gemma2", "gemma3_text", "phi3", "olmo2", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe")


def np_new_layer_window(cfg, n):
    """The window of layer N of issue 36's tiny configs, read from the config as written: Gemma 2
    even layers, Gemma 3 all but every sliding_window_pattern-th, Phi-3 / Mixtral every layer."""
    kind = cfg["model_type"]
    if kind == "gemma2":  # Gemma2Config / Gemma3TextConfig defaults: window 4096, pattern 6
        return cfg.get("sliding_window", 4096) if n % 2 == 0 else None
    if kind == "gemma3_text":
        return cfg.get("sliding_window", 4096) if (n + 1) % cfg.get("sliding_window_pattern", 6) else None
    return cfg.get("sliding_window") if kind in ("phi3", "mixtral") else None


def np_new_rotary(cfg, n, length):
    """-> (R, (R/2) frequencies, the cos/sin factor) of layer N on LENGTH positions: Gemma 3's local
    layers rope_local_base_freq, its global ones rope_theta with the linear factor; Phi-3's
    LongRoPE on int(P * partial_rotary_factor) dims, long factors past the original length."""
    kind, h = cfg["model_type"], cfg["num_attention_heads"]
    p = cfg.get("head_dim") or cfg["hidden_size"] // h
    theta = cfg.get("rope_theta", 10000.0)
    rope = {"type": "default", "theta": theta}
    if kind == "gemma3_text" and np_new_layer_window(cfg, n) is not None:
        rope["theta"] = cfg["rope_local_base_freq"]
    elif kind == "gemma3_text" and cfg.get("rope_scaling"):
        rope.update(type=cfg["rope_scaling"]["rope_type"], factor=cfg["rope_scaling"]["factor"])
    if kind != "phi3":
        return p, np_inv_freq(rope, p), 1.0
    dims = int(p * cfg.get("partial_rotary_factor", 1.0))
    rs, orig = cfg["rope_scaling"], cfg.get("original_max_position_embeddings", 4096)
    ext = np.array(rs["long_factor"] if length > orig else rs["short_factor"])
    f = cfg.get("max_position_embeddings", 4096) / orig
    return dims, np_inv_freq(rope, dims) / ext, math.sqrt(1 + math.log(f) / math.log(orig)) if f > 1 else 1.0


def numpy_new_reference(t, cfg, x, n):
    """issue 36's attentions in numpy, from the model cards' equations: Gemma's norm x (1 + w),
    soft-capping as a float term, Phi-3's qkv rows sliced by hand and LongRoPE as complex rotation
    of the first R dims scaled by the attention factor, OLMo's norms over the whole projection.
    -> normed, q_rotary, k_rotary, weights, output, v."""
    kind, e, h = cfg["model_type"], cfg["hidden_size"], cfg["num_attention_heads"]
    g, eps = cfg.get("num_key_value_heads", h), cfg["rms_norm_eps"]
    p = cfg.get("head_dim") or e // h
    gem = kind.startswith("gemma")
    one = 1.0 if gem else 0.0
    normed = None if kind == "olmo2" else np_rms_norm(x, t["input_layernorm.weight"] + one, eps)
    src = x if normed is None else normed
    if kind == "phi3":
        w = t["self_attn.qkv_proj.weight"]
        proj = {"q": src @ w[:h * p].T, "k": src @ w[h * p:(h + g) * p].T, "v": src @ w[(h + g) * p:].T}
    else:
        proj = {c: src @ t[f"self_attn.{c}_proj.weight"].T + t.get(f"self_attn.{c}_proj.bias", 0.0) for c in "qkv"}
    if kind in ("olmo2", "olmoe"):
        proj["q"] = np_rms_norm(proj["q"], t["self_attn.q_norm.weight"], eps)
        proj["k"] = np_rms_norm(proj["k"], t["self_attn.k_norm.weight"], eps)
    q, k, v = (np_heads(proj[c], p) for c in "qkv")
    if kind in ("gemma3_text", "qwen3_moe"):
        q = np_rms_norm(q, t["self_attn.q_norm.weight"] + one, eps)
        k = np_rms_norm(k, t["self_attn.k_norm.weight"] + one, eps)
    window = np_new_layer_window(cfg, n)
    dims, freqs, factor = np_new_rotary(cfg, n, x.shape[1])
    rot = lambda a: np.concatenate([np_rotary(a[..., :dims], freqs) * factor, a[..., dims:]], axis=-1)  # noqa: E731
    qr, kr = rot(q), rot(k)
    length = x.shape[1]
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = (j <= i) & ((j > i - window) if window is not None else True)
    scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if kind in ("gemma2", "gemma3_text") else p ** -0.5
    idx = np.arange(h) // (h // g)
    additive = None
    if kind == "gemma2":  # the soft cap as the difference it makes to each score
        raw = np.matmul(qr, np.swapaxes(kr[:, idx], -1, -2)) * scale
        cap = cfg.get("attn_logit_softcapping", 50.0)
        additive = cap * np.tanh(raw / cap) - raw
    ctx, weights = reference.masked_softmax_attention(qr, kr[:, idx], v[:, idx], scale, allowed, additive)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(x.shape[0], length, -1)
    return normed, qr, kr, weights, ctx @ t["self_attn.o_proj.weight"].T + t.get("self_attn.o_proj.bias", 0.0), v


def sdpa_reference(q_rot, k_rot, v, window):
    """PyTorch 1.13's scaled dot product attention (torch.nn.functional._scaled_dot_product_attention,
    bool mask, true = attend) on the numpy reference's rotated q/k, kv heads repeated with
    repeat_interleave. -> weights (B, H, L, L)."""
    q, k, v = (torch.from_numpy(np.ascontiguousarray(a)) for a in (q_rot, k_rot, v))
    n_rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    length = q.shape[2]
    keep = torch.ones(length, length, dtype=torch.bool).tril()
    if window is not None:
        keep &= ~torch.ones(length, length, dtype=torch.bool).tril(-window)
    return torch.nn.functional._scaled_dot_product_attention(q, k, v, keep, 0.0, True, False)[1].numpy()


def mha_reference(spec, t, x_in, mask):
    """torch.nn.MultiheadAttention (float64) with the family's weights reshaped into
    in_proj_weight (3E, E) / out_proj; gpt2, bert and bloom only (no rotary). -> weights, output."""
    kind, s = spec["kind"], spec["semantics"]
    e, h, length = x_in.shape[2], s["heads"], x_in.shape[1]
    m = nn.MultiheadAttention(e, h, batch_first=True, dtype=torch.float64)
    kpm, attn_mask = None, None
    if kind == "gpt2":
        w_in, b_in = t["attn.c_attn.weight"].T, t["attn.c_attn.bias"]
        w_out, b_out = t["attn.c_proj.weight"].T, t["attn.c_proj.bias"]
        attn_mask = torch.ones(length, length, dtype=torch.bool).triu(1)
    elif kind == "bert":
        w_in = torch.cat([t[f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
        b_in = torch.cat([t[f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
        w_out, b_out = t["attention.output.dense.weight"], t["attention.output.dense.bias"]
        kpm = None if mask is None else torch.from_numpy(mask == 0)
    else:  # bloom: de-interleave the per-head [q, k, v] rows, ALiBi as a float mask
        p = e // h
        w_in, b_in = (torch.cat([torch.from_numpy(a) for a in np_unfuse(t[name].numpy(), h, p)])
                      for name in ("self_attention.query_key_value.weight", "self_attention.query_key_value.bias"))
        w_out, b_out = t["self_attention.dense.weight"], t["self_attention.dense.bias"]
        rel = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # j - i
        slopes = torch.tensor(s["alibi_slopes"], dtype=torch.float64)
        bias = slopes[:, None, None] * rel[None].to(torch.float64)
        bias = bias.masked_fill(rel[None] > 0, float("-inf"))
        attn_mask = bias.repeat(x_in.shape[0], 1, 1)  # (B*H, L, L)
    with torch.no_grad():
        m.in_proj_weight.copy_(w_in)
        m.in_proj_bias.copy_(b_in)
        m.out_proj.weight.copy_(w_out)
        m.out_proj.bias.copy_(b_out)
        out, weights = m(x_in, x_in, x_in, key_padding_mask=kpm, attn_mask=attn_mask,
                         need_weights=True, average_attn_weights=False)
    return weights.numpy(), out.numpy()


# ------------------------------------------------------------------------------ cases, manifest
def paper_alibi_slopes(n):
    """ALiBi slopes as in Press et al.'s reference code (get_slopes), independent of
    build_alibi_tensor: the power-of-two slopes, then every other slope of the next power of two."""
    def power_of_2(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start ** k for k in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_alibi_slopes(2 * closest)[0::2][: n - closest]


def semantics(kind, cfg, window):
    """What the C++ side must reproduce for this config, read independently of hf_attention."""
    h = cfg.get("num_attention_heads", cfg.get("n_head"))
    e = cfg.get("hidden_size", cfg.get("n_embd"))
    p = cfg.get("head_dim") or e // h
    s = {"heads": h, "kv_heads": cfg.get("num_key_value_heads", h), "head_dim": p, "scale": p ** -0.5,
         "causal": kind != "bert", "window": window, "alibi": kind == "bloom", "rotary": None,
         "qk_norm": kind == "qwen3", "mask_fill": "additive torch.finfo(dtype).min"}
    s["norm"], s["norm_eps"] = {
        "gpt2": ("layer_norm", cfg.get("layer_norm_epsilon")), "bert": (None, None),
        "gpt_neox": ("layer_norm", cfg.get("layer_norm_eps")),
        "bloom": ("layer_norm", cfg.get("layer_norm_epsilon"))}.get(kind, ("rms_norm", cfg.get("rms_norm_eps")))
    if kind == "bloom":
        s["alibi_slopes"] = paper_alibi_slopes(h)
    if kind == "gpt_neox":
        s["rotary"], s["rotary_dims"] = "half", int(p * cfg["rotary_pct"])
        s["rope"] = {"type": "default", "theta": float(cfg["rotary_emb_base"])}
    elif kind in ("llama", "mistral", "qwen2", "qwen3"):
        old = cfg.get("rope_scaling") or {}
        new = cfg.get("rope_parameters") or {}
        r = new or old
        s["rotary"], s["rotary_dims"] = "half", p
        s["rope"] = {"type": r.get("rope_type", r.get("type", "default")),
                     "theta": float(new.get("rope_theta", cfg.get("rope_theta", 10000.0)))}
        if "factor" in r:
            s["rope"]["factor"] = r["factor"]
        if s["rope"]["type"] == "llama3":
            s["rope"].update(low=r["low_freq_factor"], high=r["high_freq_factor"],
                             orig=r["original_max_position_embeddings"])
    if kind in NEW_KINDS:  # per layer: make_case's new_layer_semantics
        return s
    if s["rotary"]:
        s["inv_freq"] = np_inv_freq(s["rope"], s["rotary_dims"]).tolist()
    return s


CASES = [  # name, config, state dict, tensor prefix, dtype, layers, window, sharding, mask
    dict(name="gpt2", kind="gpt2", config=gpt2_config, state=gpt2_state, prefix="", dtype="f32", layers=[1, 2]),
    dict(name="gpt2_bf16", kind="gpt2", config=gpt2_config, state=gpt2_state, prefix="transformer.",
         dtype="bf16", layers=[1]),
    dict(name="bert", kind="bert", config=lambda d: bert_config(d, "BertForMaskedLM"), state=bert_state,
         prefix="bert.", dtype="f32", layers=[1]),
    dict(name="bert_mask", kind="bert", config=lambda d: bert_config(d, "BertModel"), state=bert_state,
         prefix="", dtype="f32", layers=[1], mask=[[1] * L, [1] * (L - 2) + [0, 0]]),
    dict(name="llama", kind="llama", config=llama_config, state=llama_state, prefix="model.", dtype="f32",
         layers=[1, 2]),
    dict(name="llama_bf16", kind="llama", config=llama_config, state=llama_state, prefix="model.",
         dtype="bf16", layers=[1]),
    dict(name="llama_linear", kind="llama", config=llama_linear_config, state=llama_state, prefix="model.",
         dtype="f32", layers=[1]),
    dict(name="mistral", kind="mistral", config=mistral_config, state=llama_state, prefix="model.",
         dtype="f32", layers=[1], window=3, shard_before="model.layers.1.self_attn.o_proj.weight"),
    dict(name="qwen2", kind="qwen2", config=qwen2_config, state=llama_state, prefix="model.", dtype="f32",
         layers=[1]),
    dict(name="qwen3", kind="qwen3", config=qwen3_config, state=llama_state, prefix="model.", dtype="f32",
         layers=[1]),
    dict(name="gpt_neox", kind="gpt_neox", config=gpt_neox_config, state=gpt_neox_state, prefix="gpt_neox.",
         dtype="f32", layers=[1]),
    dict(name="bloom", kind="bloom", config=bloom_config, state=bloom_state, prefix="", dtype="f32",
         layers=[1, 2]),
    dict(name="bloom_bf16", kind="bloom", config=bloom_config, state=bloom_state, prefix="transformer.",
         dtype="bf16", layers=[1]),
    dict(name="gpt_neox_f16", kind="gpt_neox", config=gpt_neox_config, state=gpt_neox_state, prefix="gpt_neox.",
         dtype="f16", layers=[1]),
    dict(name="gemma2", kind="gemma2", config=gemma2_config, state=new_family_state, prefix="model.", dtype="f32",
         layers=[0, 1], window=3),
    dict(name="gemma3_bf16", kind="gemma3_text", config=gemma3_config, state=new_family_state, prefix="model.",
         dtype="bf16", layers=[0, 1], window=4),
    dict(name="phi3", kind="phi3", config=phi3_config, state=new_family_state, prefix="model.", dtype="f32",
         layers=[1], window=5),
    dict(name="olmo2", kind="olmo2", config=lambda d: new_config("olmo2", d, rms_norm_eps=1e-5),
         state=new_family_state, prefix="model.", dtype="f32", layers=[1]),
    dict(name="olmoe", kind="olmoe", config=lambda d: new_config("olmoe", d, num_hidden_layers=2, num_experts=4, num_experts_per_tok=2, intermediate_size=16,
                                                                 clip_qkv=None, rms_norm_eps=1e-5),
         state=new_family_state, prefix="model.", dtype="f32", layers=[1]),
    dict(name="qwen3_moe", kind="qwen3_moe", config=lambda d: new_config(
        "qwen3_moe", d, num_hidden_layers=2, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
         state=new_family_state, prefix="model.", dtype="f32", layers=[1]),
    dict(name="gemma", kind="gemma", config=lambda d: new_config("gemma", d, num_hidden_layers=2, num_key_value_heads=4),
         state=new_family_state, prefix="model.", dtype="f32", layers=[1]),
    dict(name="mixtral", kind="mixtral", config=lambda d: new_config(
        "mixtral", d, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
        intermediate_size=16,
        rms_norm_eps=1e-5), state=new_family_state, prefix="model.", dtype="f32", layers=[1], window=4),
    dict(name="qwen2_moe_bf16", kind="qwen2_moe", config=lambda d: new_config(
        "qwen2_moe", d, num_hidden_layers=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, qkv_bias=True, mlp_only_layers=[]),
         state=new_family_state, prefix="model.", dtype="bf16", layers=[1]),
]  # append new cases at the end: the seeds follow the order


def new_layer_semantics(cfg, n, s):
    """issue 36's layer N: S completed with its window, rotary (Phi-3: the short factors in
    inv_freq, the long ones in long_inv_freq, the cos/sin factor), soft cap and q/k norms, read from
    the config as written (np_new_layer_window, np_new_rotary)."""
    kind, p = cfg["model_type"], s["head_dim"]
    dims, freqs, factor = np_new_rotary(cfg, n, 1)
    s = dict(s, window=np_new_layer_window(cfg, n), rotary="half", rotary_dims=dims, inv_freq=freqs.tolist(),
             qk_norm=kind in ("gemma3_text", "qwen3_moe", "olmo2", "olmoe"), qk_norm_whole=kind in ("olmo2", "olmoe"),
             softcap=cfg.get("attn_logit_softcapping", 50.0) if kind == "gemma2" else None,
             norm=None if kind == "olmo2" else "rms_norm", norm_offset=1.0 if kind.startswith("gemma") else 0.0)
    if kind == "phi3":
        _, long_freqs, _ = np_new_rotary(cfg, n, 1 << 30)
        s.update(long_inv_freq=long_freqs.tolist(), attention_scaling=factor,
                 long_after=cfg.get("original_max_position_embeddings", 4096))
    if kind in ("gemma2", "gemma3_text"):
        s["scale"] = cfg.get("query_pre_attn_scalar", 256) ** -0.5
    return s


def check_close(case, what, got, want, tol=TOL):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, **tol):
        diff = np.abs(got - want).max() if got.shape == want.shape else f"shapes {got.shape} vs {want.shape}"
        raise SystemExit(f"{case}: {what}: transcription and independent reference differ by {diff}")


def check_weights(case, weights, s, mask):
    """Rows sum to 1; entries outside the causal / window / padding pattern are exactly 0."""
    check_close(case, "weight rows sum to 1", weights.sum(-1), np.ones(weights.shape[:-1]), dict(rtol=0, atol=1e-12))
    length = weights.shape[-1]
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    hidden = np.zeros((length, length), dtype=bool)
    if s["causal"]:
        hidden |= j > i
    if s["window"] is not None:
        hidden |= j <= i - s["window"]
    hidden = np.broadcast_to(hidden, weights.shape)
    if mask is not None:
        hidden = hidden | (mask == 0)[:, None, None, :]
    if np.any(weights[hidden] != 0.0) or np.any(weights[~hidden] <= 0.0):
        raise SystemExit(f"{case}: weights: masked entries are not exactly 0 (or visible ones are)")


def make_case(spec, seed):
    """Write one checkpoint folder and the goldens of its tested layers; -> manifest entries."""
    name, kind = spec["name"], spec["kind"]
    folder = ROOT / name
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "golden").mkdir(parents=True)
    cfg = spec["config"](spec["dtype"])
    init = Init(seed)
    state = spec["state"](cfg, init, spec["prefix"])
    if spec["dtype"] != "f32":
        state = {k: v.to({"bf16": torch.bfloat16, "f16": torch.float16}[spec["dtype"]]) for k, v in state.items()}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_checkpoint(folder, state, spec.get("shard_before"))
    loaded = read_checkpoint(folder)  # the goldens use the weights as stored, read back
    if sorted(loaded) != sorted(state) or any(not torch.equal(loaded[k], state[k].double()) for k in state):
        raise SystemExit(f"{name}: the checkpoint does not read back")
    s = semantics(kind, cfg, spec.get("window"))
    spec = dict(spec, semantics=s)
    family_cfg = cfg
    if kind in NEW_KINDS:  # the transcription reads the config as transformers completes it
        import hf_model
        family_cfg = hf_model.with_defaults(cfg)
    mask = None if "mask" not in spec else np.array(spec["mask"], dtype=np.int64)
    if mask is not None:
        np.save(folder / "golden" / "attention_mask.npy", mask)
        np.save(folder / "golden" / "key_padding_mask.npy", mask == 0)
    entries = []
    for n in spec["layers"]:
        pre = layer_prefix(kind, spec["prefix"], n)
        t = {k[len(pre):]: v for k, v in loaded.items() if k.startswith(pre)}
        e = cfg.get("hidden_size", cfg.get("n_embd"))
        hidden = init.w(B, L, e, scale=1.0)  # float32
        x = hidden.to(torch.float64)
        extra = {} if mask is None else {"attention_mask": torch.from_numpy(mask)}
        stages = {k: (None if v is None else v.numpy())
                  for k, v in hf.FAMILIES[kind](t, family_cfg, x, n, **extra).items()}
        t_np = {k: v.numpy() for k, v in t.items()}
        if kind in NEW_KINDS:
            s = new_layer_semantics(cfg, n, semantics(kind, cfg, None))
            *ref, v_ref = numpy_new_reference(t_np, cfg, x.numpy(), n)
        else:
            *ref, v_ref = numpy_reference(spec, t_np, cfg, x.numpy(), mask)
        for what, want in zip(("normed", "q_rotary", "k_rotary", "weights", "output"), ref):
            if (want is None) != (stages[what] is None):
                raise SystemExit(f"{name}: {what}: present in one reference only")
            if want is not None:
                check_close(f"{name} L{n}", what + " (numpy)", stages[what], want)
        if kind in ("gpt2", "bert", "bloom"):
            x_in = x if stages["normed"] is None else torch.from_numpy(stages["normed"])
            w_mha, out_mha = mha_reference(spec, t, x_in, mask)
            check_close(f"{name} L{n}", "weights (nn.MultiheadAttention)", stages["weights"], w_mha)
            check_close(f"{name} L{n}", "output (nn.MultiheadAttention)", stages["output"], out_mha)
        if s["rotary"] and kind != "gemma2" and s["scale"] == s["head_dim"] ** -0.5:  # torch 1.13: no scale, no cap
            w_sdpa = sdpa_reference(ref[1], ref[2], v_ref, s["window"])
            check_close(f"{name} L{n}", "weights (scaled_dot_product_attention)", stages["weights"], w_sdpa)
        check_weights(f"{name} L{n}", stages["weights"], s, mask)
        rel = lambda f: None if f is None else f"{name}/golden/{f}"  # noqa: E731
        np.save(folder / "golden" / f"hidden_L{n}.npy", hidden.numpy())
        expected = {}
        for what, value in stages.items():
            expected[what] = None if value is None else rel(f"{what}_L{n}.npy")
            if value is not None:
                np.save(folder / "golden" / f"{what}_L{n}.npy", np.ascontiguousarray(value, dtype=np.float64))
        entries.append({
            "name": f"{name}_L{n}", "model": name, "model_type": cfg["model_type"], "dtype": spec["dtype"],
            "sharded": "shard_before" in spec, "tensor_prefix": pre, "layer": n,
            "hidden": rel(f"hidden_L{n}.npy"),
            "attention_mask": None if mask is None else rel("attention_mask.npy"),
            "key_padding_mask": None if mask is None else rel("key_padding_mask.npy"),
            "expected": expected, "semantics": s, "tolerance": {"rtol": 1e-4, "atol": 1e-5}})
    return entries


# ------------------------------------------------------------------------------- bad checkpoints
def make_bad_cases():
    """tests/fixtures/models/bad/<name>/: a 1-layer bf16 llama (E=16) broken one way each, and
    bad/cases.json [{name, model, layer, exit: 3, error_contains}] (error_contains: the name the one-line
    error should mention; the exact wording is attntrace's)."""
    bad = ROOT / "bad"
    shutil.rmtree(bad, ignore_errors=True)
    bad.mkdir()
    base = decoder_config("llama", "bf16", 2, 1, head_dim=8, hidden_size=16, intermediate_size=16,
                          num_hidden_layers=1)
    state = {k: v.to(torch.bfloat16) for k, v in llama_state(base, Init(7), "model.").items()}
    np.save(bad / "hidden.npy", Init(8).w(2, L, 16, scale=1.0).numpy())
    cases = []

    def case(name, cfg, tensors, error, layer=0, shard_before=None, drop_file=None):
        folder = bad / name
        folder.mkdir()
        if cfg is not None:
            (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        save_checkpoint(folder, tensors, shard_before)
        if drop_file:
            (folder / drop_file).unlink()
        cases.append({"name": name, "model": f"bad/{name}", "hidden": "bad/hidden.npy", "layer": layer,
                      "exit": 3, "error_contains": error})

    without = {k: v for k, v in base.items() if k != "num_attention_heads"}
    case("missing_config_key", without, state, "num_attention_heads")
    case("unknown_model_type", dict(base, model_type="t5"), state, "t5")
    case("no_config", None, state, "config.json")
    case("missing_shard", base, state, "model-00002-of-00002.safetensors",
         shard_before="model.layers.0.self_attn.o_proj.weight", drop_file="model-00002-of-00002.safetensors")
    q_name = "model.layers.0.self_attn.q_proj.weight"
    case("shape_mismatch", base, dict(state, **{q_name: state[q_name][:8]}), "q_proj")  # (8, 16), not (16, 16)
    case("missing_tensor", base, {k: v for k, v in state.items() if "v_proj" not in k}, "v_proj")
    case("layer_out_of_range", base, state, "layer", layer=1)
    (bad / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    return len(cases)


def main():
    ROOT.mkdir(parents=True, exist_ok=True)
    manifest = []
    for seed, spec in enumerate(CASES, start=1100):
        manifest += make_case(spec, seed)
        print(f"{spec['name']}: ok ({len(spec['layers'])} layer(s))")
    doc = {"comment": "Goldens of one attention layer of tiny Hugging Face checkpoints, written by "
                      "tests/goldens/make_checkpoint_goldens.py from a float64 transcription of "
                      "transformers' eager attention (hf_attention.py); paths are relative to this "
                      "folder. attention_mask: HF convention (1 = keep); key_padding_mask: attntrace / "
                      "PyTorch convention (true = ignore).",
           "cases": manifest}
    (ROOT / "cases.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(manifest)} cases -> {ROOT / 'cases.json'}, {make_bad_cases()} bad checkpoints -> {ROOT / 'bad'}")


if __name__ == "__main__":
    main()
