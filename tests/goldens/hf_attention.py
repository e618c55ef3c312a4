"""One attention layer of each Hugging Face family, transcribed into PyTorch float64.

transformers could not be installed where these fixtures were made (no PyPI access, no device
machine), so this module transcribes, function by function, the eager attention path of
huggingface/transformers (src/transformers/...). Each function names the file and the function it
transcribes; the arithmetic is kept, the dtype juggling (float32 upcasts, bf16 casts) is dropped:
everything here runs in float64 on the weights as stored (bf16 upcast exactly).

Legend: B batch, L sequence length, E hidden size, H heads, G key/value heads, P head dim.
Every family function takes
  t    : {short name -> float64 tensor} of layer N (names below, without the layer prefix)
  cfg  : the config.json dict
  x    : (B, L, E) float64, the residual stream entering layer N (output_hidden_states[N])
and returns {"normed": (B, L, E) or None, "q_rotary"/"k_rotary": (B, H|G, L, P) or None,
             "weights": (B, H, L, L), "output": (B, L, E)}.
"""
import math

import torch
from torch import nn

F64 = torch.float64
MIN = torch.finfo(F64).min  # transformers fills masked scores with torch.finfo(dtype).min


# ----------------------------------------------------------------------------------------- norms
def layer_norm(x, w, b, eps):
    """x (..., E) -> (..., E): torch.nn.LayerNorm, as GPT2Block.ln_1, GPTNeoXLayer.input_layernorm,
    BloomBlock.input_layernorm (models/{gpt2,gpt_neox,bloom}/modeling_*.py)."""
    return nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def rms_norm(x, w, eps):
    """x (..., D) -> (..., D): models/llama/modeling_llama.py LlamaRMSNorm.forward (Mistral, Qwen2 and
    Qwen3 RMSNorm are copies): weight * x * rsqrt(mean(x^2) + eps)."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


# ------------------------------------------------------------------------------------------ rope
def rope_parameters(cfg):
    """config.json -> the standardized rope dict {rope_type, rope_theta, factor, ...}.

    modeling_rope_utils.py RotaryEmbeddingConfigMixin.standardize_rope_params (new style,
    `rope_parameters`) and models/llama/modeling_llama.py LlamaRotaryEmbedding.__init__ (old style:
    rope_scaling.get("rope_type", rope_scaling.get("type")) with a top-level rope_theta)."""
    rp = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    rp.setdefault("rope_type", rp.get("type", "default"))
    rp.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    if rp["rope_type"] in ("llama3", "yarn", "longrope"):
        rp.setdefault("original_max_position_embeddings", cfg["max_position_embeddings"])
    return rp


def inv_freq(rp, dim):
    """(dim/2,) inverse frequencies for rotary dims `dim`.

    modeling_rope_utils.py _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters
    (inv_freq /= factor) and _compute_llama3_parameters (the three wavelength bands)."""
    base = rp["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(F64) / dim))
    kind = rp["rope_type"]
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / rp["factor"]
    if kind != "llama3":
        raise ValueError(f"rope_type {kind} is not transcribed")
    factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old_context_len = rp["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    wavelen = 2 * math.pi / inv
    inv_llama = torch.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_llama)


def rotary_cos_sin(inv, seq_len):
    """(L, dim) cos and sin at positions 0..L-1: modeling_llama.py LlamaRotaryEmbedding.forward
    (freqs = inv_freq (x) positions; emb = cat(freqs, freqs); attention_scaling is 1.0 for
    default, linear and llama3)."""
    positions = torch.arange(seq_len, dtype=F64)
    freqs = torch.outer(positions, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    """modeling_llama.py rotate_half: (x1, x2) -> (-x2, x1) over the last dim's halves."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    """x (B, heads, L, P) -> same; rotates the first cos.shape[-1] dims, passes the rest through.

    modeling_llama.py apply_rotary_pos_emb (all dims) and models/gpt_neox/modeling_gpt_neox.py
    GPTNeoXAttention._attn_projections_and_rope (query_rot = query[..., :rotary_ndims], rotated,
    then torch.cat((query, query_pass), dim=-1))."""
    d = cos.shape[-1]
    rot, keep = x[..., :d], x[..., d:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, keep), dim=-1)


# ----------------------------------------------------------------------------------- masks, core
def causal_additive(seq_len, window=None):
    """(1, 1, L, L) additive mask, 0 where visible, finfo.min elsewhere.

    masking_utils.py causal_mask_function (kv_idx <= q_idx) and sliding_window_overlay
    (kv_idx > q_idx - sliding_window), and-ed by create_sliding_window_causal_mask."""
    q = torch.arange(seq_len)[:, None]
    kv = torch.arange(seq_len)[None, :]
    visible = kv <= q
    if window is not None:
        visible = visible & (kv > q - window)
    zero, fill = torch.zeros((), dtype=F64), torch.full((), MIN, dtype=F64)
    return torch.where(visible, zero, fill)[None, None]


def repeat_kv(x, n_rep):
    """(B, G, L, P) -> (B, G*n_rep, L, P): modeling_llama.py repeat_kv (kv head g serves query heads
    g*n_rep .. g*n_rep + n_rep - 1)."""
    b, g, length, p = x.shape
    return x[:, :, None].expand(b, g, n_rep, length, p).reshape(b, g * n_rep, length, p)


def eager_attention(q, k, v, additive, scaling):
    """q (B, H, L, P), k/v (B, G, L, P) -> context (B, L, H, P), weights (B, H, L, L).

    modeling_llama.py eager_attention_forward: repeat_kv, q k^T * scaling + mask, softmax, @ v,
    transpose(1, 2)."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    if additive is not None:
        scores = scores + additive
    weights = nn.functional.softmax(scores, dim=-1)
    return torch.matmul(weights, v).transpose(1, 2).contiguous(), weights


def linear(x, t, name, bias=True):
    """nn.Linear: x @ W^T + b, W = t[name.weight] (out, in), b = t[name.bias] when present."""
    b = t.get(name + ".bias") if bias else None
    return nn.functional.linear(x, t[name + ".weight"], b)


# --------------------------------------------------------------------------------------- families
def gpt2(t, cfg, x, layer):
    """models/gpt2/modeling_gpt2.py GPT2Block.forward (ln_1), GPT2Attention.forward
    (c_attn(...).split(split_size, dim=2), view (B, L, H, P).transpose(1, 2)) and
    eager_attention_forward (/ sqrt(P) when scale_attn_weights, / (layer_idx + 1) when
    scale_attn_by_inverse_layer_idx, causal torch.where(mask, w, finfo.min)); c_proj.
    Conv1D (pytorch_utils.py Conv1D.forward) is x @ weight + bias with weight (in, out)."""
    e, h = cfg["n_embd"], cfg["n_head"]
    p = e // h
    normed = layer_norm(x, t["ln_1.weight"], t["ln_1.bias"], cfg["layer_norm_epsilon"])
    qkv = normed @ t["attn.c_attn.weight"] + t["attn.c_attn.bias"]
    b, length, _ = x.shape
    q, k, v = (s.view(b, length, h, p).transpose(1, 2) for s in qkv.split(e, dim=2))
    scaling = (p ** -0.5) if cfg.get("scale_attn_weights", True) else 1.0
    if cfg.get("scale_attn_by_inverse_layer_idx", False):
        scaling /= float(layer + 1)
    ctx, weights = eager_attention(q, k, v, causal_additive(length), scaling)
    out = ctx.reshape(b, length, e) @ t["attn.c_proj.weight"] + t["attn.c_proj.bias"]
    return {"normed": normed, "q_rotary": None, "k_rotary": None, "weights": weights, "output": out}


def bert(t, cfg, x, layer, attention_mask=None):
    """models/bert/modeling_bert.py BertSelfAttention.forward (query/key/value Linear,
    transpose_for_scores, q k^T / sqrt(P) + extended mask, softmax, @ v) and BertSelfOutput.dense
    (the output projection; BertSelfOutput then adds the residual inside LayerNorm, not done here).
    The padding mask is modeling_utils.py ModuleUtilsMixin.get_extended_attention_mask:
    (1.0 - mask[:, None, None, :]) * torch.finfo(dtype).min. Post-norm: no pre-attention norm."""
    e, h = cfg["hidden_size"], cfg["num_attention_heads"]
    p = e // h
    b, length, _ = x.shape

    def heads(name):
        return linear(x, t, "attention.self." + name).view(b, length, h, p).transpose(1, 2)

    additive = None
    if attention_mask is not None:
        additive = (1.0 - attention_mask.to(F64)[:, None, None, :]) * MIN
    ctx, weights = eager_attention(heads("query"), heads("key"), heads("value"), additive, p ** -0.5)
    out = linear(ctx.reshape(b, length, e), t, "attention.output.dense")
    return {"normed": None, "q_rotary": None, "k_rotary": None, "weights": weights, "output": out}


def sliding_window_for(cfg, layer):
    """The window of layer N, or None.

    mistral: models/mistral/modeling_mistral.py MistralModel.forward uses
    create_sliding_window_causal_mask when config.sliding_window is not None (every layer).
    qwen2/qwen3: configuration_qwen2.py / configuration_qwen3.py Qwen2Config.__init__:
    sliding_window = sliding_window if use_sliding_window else None; layer_types[i] =
    "sliding_attention" if sliding_window is not None and i >= max_window_layers; the attention uses
    the window only on "sliding_attention" layers (Qwen2Attention.__init__)."""
    kind = cfg["model_type"]
    if kind == "mistral":
        return cfg.get("sliding_window")
    if kind in ("qwen2", "qwen3"):
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        types = cfg.get("layer_types") or [
            "sliding_attention" if window is not None and i >= cfg["max_window_layers"] else "full_attention"
            for i in range(cfg["num_hidden_layers"])]
        return window if types[layer] == "sliding_attention" else None
    return None


def llama(t, cfg, x, layer):
    """models/llama/modeling_llama.py LlamaDecoderLayer.forward (input_layernorm) and
    LlamaAttention.forward: q/k/v_proj, view (B, L, -1, P).transpose(1, 2), apply_rotary_pos_emb,
    eager_attention_forward with scaling P^-0.5, o_proj. The same code serves
    models/mistral/modeling_mistral.py MistralAttention (+ sliding_window mask),
    models/qwen2/modeling_qwen2.py Qwen2Attention (q/k/v bias=True, o_proj bias=False, window per
    layer_types) and models/qwen3/modeling_qwen3.py Qwen3Attention (q_norm / k_norm: RMSNorm over
    P of each head, right after the projection and before the rotary)."""
    e, h = cfg["hidden_size"], cfg["num_attention_heads"]
    p = cfg.get("head_dim") or e // h
    eps = cfg["rms_norm_eps"]
    b, length, _ = x.shape
    normed = rms_norm(x, t["input_layernorm.weight"], eps)

    def heads(name):
        s = linear(normed, t, "self_attn." + name).view(b, length, -1, p)
        if cfg["model_type"] == "qwen3" and name in ("q_proj", "k_proj"):
            s = rms_norm(s, t["self_attn." + name[0] + "_norm.weight"], eps)
        return s.transpose(1, 2)

    q, k, v = heads("q_proj"), heads("k_proj"), heads("v_proj")
    cos, sin = rotary_cos_sin(inv_freq(rope_parameters(cfg), p), length)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    additive = causal_additive(length, sliding_window_for(cfg, layer))
    ctx, weights = eager_attention(q, k, v, additive, p ** -0.5)
    out = linear(ctx.reshape(b, length, h * p), t, "self_attn.o_proj")
    return {"normed": normed, "q_rotary": q, "k_rotary": k, "weights": weights, "output": out}


def gpt_neox(t, cfg, x, layer):
    """models/gpt_neox/modeling_gpt_neox.py GPTNeoXLayer.forward (input_layernorm),
    GPTNeoXAttention._attn_projections_and_rope (query_key_value(x).view(B, L, H, 3P); query =
    [..., :P], key = [..., P:2P], value = [..., 2P:]; rotary on the first
    rotary_ndims = int(P * rotary_pct) dims with base rotary_emb_base), _attn (q k^T * P^-0.5,
    causal torch.where(bias, w, finfo.min), softmax) and dense."""
    e, h = cfg["hidden_size"], cfg["num_attention_heads"]
    p = e // h
    b, length, _ = x.shape
    normed = layer_norm(x, t["input_layernorm.weight"], t["input_layernorm.bias"], cfg["layer_norm_eps"])
    qkv = linear(normed, t, "attention.query_key_value").view(b, length, h, 3 * p)
    q, k, v = (qkv[..., i * p:(i + 1) * p].permute(0, 2, 1, 3) for i in range(3))
    rotary_ndims = int(p * cfg["rotary_pct"])
    rp = {"rope_type": "default", "rope_theta": cfg.get("rotary_emb_base", 10000.0)}
    cos, sin = rotary_cos_sin(inv_freq(rp, rotary_ndims), length)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    ctx, weights = eager_attention(q, k, v, causal_additive(length), p ** -0.5)
    out = linear(ctx.reshape(b, length, e), t, "attention.dense")
    return {"normed": normed, "q_rotary": q, "k_rotary": k, "weights": weights, "output": out}


def alibi_slopes(n_head):
    """(H,) slopes: models/bloom/modeling_bloom.py build_alibi_tensor (closest power of two, base
    2^(-2^-(log2(closest) - 3)), powers 1..closest; the remaining heads take the odd powers of
    2^(-2^-(log2(2*closest) - 3)))."""
    closest = 2 ** math.floor(math.log2(n_head))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=F64)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n_head:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=F64)
        remaining = min(closest, n_head - closest)
        extra_powers = torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def bloom(t, cfg, x, layer):
    """models/bloom/modeling_bloom.py BloomBlock.forward (input_layernorm), BloomAttention.forward:
    _split_heads (fused.view(B, L, H, 3, P): q, k, v = [..., 0, :], [..., 1, :], [..., 2, :]),
    baddbmm(alibi, q, k^T, beta=1, alpha=1/sqrt(P)) with alibi = slope_h * key position
    (build_alibi_tensor with an all-ones attention_mask: (cumsum - 1) * mask), causal
    masked_fill(finfo.min), softmax, _merge_heads, dense. BloomAttention adds the residual itself
    (dropout_add); `output` here is dense(context), before that add."""
    e, h = cfg["hidden_size"], cfg["n_head"]
    p = e // h
    b, length, _ = x.shape
    normed = layer_norm(x, t["input_layernorm.weight"], t["input_layernorm.bias"], cfg["layer_norm_epsilon"])
    fused = linear(normed, t, "self_attention.query_key_value").view(b, length, h, 3, p)
    q, k, v = (fused[..., i, :].transpose(1, 2) for i in range(3))
    mask = torch.ones(b, length, dtype=F64)
    arange_tensor = ((mask.cumsum(dim=-1) - 1) * mask)[:, None, :]  # (B, 1, L)
    alibi = (alibi_slopes(h)[None, :, None] * arange_tensor)[:, :, None, :]  # (B, H, 1, L)
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(p) + alibi
    scores = scores.masked_fill(causal_additive(length) < 0, MIN)
    weights = nn.functional.softmax(scores, dim=-1)
    ctx = torch.matmul(weights, v).transpose(1, 2).reshape(b, length, e)
    out = linear(ctx, t, "self_attention.dense")
    return {"normed": normed, "q_rotary": None, "k_rotary": None, "weights": weights, "output": out}


FAMILIES = {"gpt2": gpt2, "bert": bert, "llama": llama, "mistral": llama, "qwen2": llama,
            "qwen3": llama, "gpt_neox": gpt_neox, "bloom": bloom}
