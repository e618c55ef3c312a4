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

# Sites (attntrace's lib/include/attntrace/model/sites.hpp, TransformerLens's hook points): when set,
# SITE_HOOK(name, layer, value, project) sees each site's value and returns the value the forward
# goes on with (make_intervention_goldens.py reads, replaces and patches through it). At "z" (the
# heads' context (B, L, H*P) before the output projection) PROJECT is that projection, so a hook can
# compute each head's output (hook_result).
SITE_HOOK = None


def site(name, layer, value, project=None):
    """VALUE as SITE_HOOK leaves it (VALUE itself when no hook is set)."""
    return value if SITE_HOOK is None else SITE_HOOK(name, layer, value, project)


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


def eager_attention(q, k, v, additive, scaling, softcap=None):
    """q (B, H, L, P), k/v (B, G, L, P) -> context (B, L, H, P), weights (B, H, L, L).

    modeling_llama.py eager_attention_forward: repeat_kv, q k^T * scaling + mask, softmax, @ v,
    transpose(1, 2). SOFTCAP: models/gemma2/modeling_gemma2.py eager_attention_forward, the scores
    / softcap, tanh, * softcap, before the mask is added."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if additive is not None:
        scores = scores + additive
    weights = nn.functional.softmax(scores, dim=-1)
    return torch.matmul(weights, v).transpose(1, 2).contiguous(), weights


def project_z(t, name, layer, z):
    """The output projection NAME of the heads' context Z (B, L, H*P), through the "z" site."""
    def project(v):
        return linear(v, t, name)
    return project(site("z", layer, z, project))


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
    def project(z):
        return z @ t["attn.c_proj.weight"] + t["attn.c_proj.bias"]

    out = project(site("z", layer, ctx.reshape(b, length, e), project))
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
    out = project_z(t, "attention.output.dense", layer, ctx.reshape(b, length, e))
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
    out = project_z(t, "self_attn.o_proj", layer, ctx.reshape(b, length, h * p))
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
    out = project_z(t, "attention.dense", layer, ctx.reshape(b, length, e))
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
    out = project_z(t, "self_attention.dense", layer, ctx)
    return {"normed": normed, "q_rotary": None, "k_rotary": None, "weights": weights, "output": out}


# ------------------------------------------------------------------ the families of issue 36
# Read from huggingface/transformers (src/transformers/models/...): gemma/modular_gemma.py and
# gemma2/configuration_gemma2.py at 008e574391258935f3ecc3035c882e73bbcac419, gemma2/modeling_gemma2.py at
# 006e86931247d7bacf94ad00ada1fb6baf11e94b, gemma3/modular_gemma3.py at 003320480b9eac976d31b6d4e0f02e80249a3826
# and modeling_gemma3.py at 0018aa647bb13801f061e2d1027c326f531b59fb, phi3/modular_phi3.py at
# 06053b84c14d72e9789fbf27844a75aa89b3ded7 and configuration_phi3.py at 008e5743..., olmo2/modular_olmo2.py at
# 008f5c8c29be84d4721dc6d1e0fcd72300580be4, mixtral/modular_mixtral.py at 008f5c8c..., qwen2_moe/modular_qwen2_moe.py
# at 001f85b38fb432858ace93f18622f07cec46d874, olmoe/modular_olmoe.py at 052b1dcdbe751ed16e8da95261021318f170a130,
# the configuration_*.py of qwen2_moe / qwen3_moe / olmoe / mixtral at 008e5743..., and
# modeling_rope_utils.py _compute_longrope_parameters at 0044e3b3facff1a1ad60b235c69d5b45beae75a4.

def gemma_rms_norm(x, w, eps):
    """models/gemma/modular_gemma.py GemmaRMSNorm.forward (Gemma2/Gemma3 copies): x * rsqrt(mean(x^2)
    + eps) * (1.0 + weight) (computed in float32 there, in float64 here)."""
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)


def longrope(cfg, dim, seq_len):
    """modeling_rope_utils.py _compute_longrope_parameters + dynamic_rope_update's
    longrope_frequency_update: -> (inv_freq (dim/2,), attention_factor). The long factors when the
    sequence (max(position_ids) + 1) is past original_max_position_embeddings, else the short ones;
    with original_max_position_embeddings in the config (Phi3Config: always, 4096 by default) the
    factor is max_position_embeddings / original_max_position_embeddings, and the attention factor
    sqrt(1 + ln(factor) / ln(original)) unless rope_scaling gives attention_factor."""
    rs = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    original = cfg.get("original_max_position_embeddings", 4096)
    factor = cfg.get("max_position_embeddings", 4096) / original
    af = rs.get("attention_factor")
    if af is None:
        af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = torch.tensor(rs["long_factor"] if seq_len > original else rs["short_factor"], dtype=F64)
    base = rs.get("rope_theta", cfg.get("rope_theta", 10000.0))
    shape = torch.arange(0, dim, 2, dtype=torch.int64).to(F64) / dim
    return 1.0 / (ext * base ** shape), af


def project_heads(normed, t, name, b, length, p, norm=None):
    """q/k/v_proj (bias when stored) -> (B, heads, L, P); NORM (a function) on (B, L, heads, P)."""
    s = linear(normed, t, "self_attn." + name).view(b, length, -1, p)
    return (norm(s) if norm else s).transpose(1, 2)


def gemma(t, cfg, x, layer):
    """gemma: GemmaAttention (LlamaAttention, scaling P^-0.5) after GemmaRMSNorm input_layernorm.
    gemma2: models/gemma2/modeling_gemma2.py Gemma2Attention: scaling query_pre_attn_scalar^-0.5,
    attn_logit_softcapping, the sliding window on layer_types' "sliding_attention" layers
    (Gemma2Config: (i + 1) % 2). gemma3_text: models/gemma3 Gemma3Attention: q_norm / k_norm
    (Gemma3RMSNorm over P) before the rotary, no soft-capping, local layers' rotary from
    rope_local_base_freq (Gemma3TextModel.rotary_emb_local, default rope), global ones' from
    rope_theta and rope_scaling; layer_types from sliding_window_pattern ((i + 1) % pattern)."""
    kind, e, h = cfg["model_type"], cfg["hidden_size"], cfg["num_attention_heads"]
    p, eps = cfg["head_dim"], cfg["rms_norm_eps"]
    b, length, _ = x.shape
    normed = gemma_rms_norm(x, t["input_layernorm.weight"], eps)
    qn = kn = None
    if kind == "gemma3_text":
        qn = lambda s: gemma_rms_norm(s, t["self_attn.q_norm.weight"], eps)  # noqa: E731
        kn = lambda s: gemma_rms_norm(s, t["self_attn.k_norm.weight"], eps)  # noqa: E731
    q, k = project_heads(normed, t, "q_proj", b, length, p, qn), project_heads(normed, t, "k_proj", b, length, p, kn)
    v = project_heads(normed, t, "v_proj", b, length, p)
    sliding = kind != "gemma" and cfg["layer_types"][layer] == "sliding_attention"
    rp = rope_parameters(cfg)
    if kind == "gemma3_text" and sliding:
        rp = {"rope_type": "default", "rope_theta": cfg["rope_local_base_freq"]}
    cos, sin = rotary_cos_sin(inv_freq(rp, p), length)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    window = cfg["sliding_window"] if sliding else None
    scaling = p ** -0.5 if kind == "gemma" else cfg["query_pre_attn_scalar"] ** -0.5
    softcap = cfg["attn_logit_softcapping"] if kind == "gemma2" else None
    ctx, weights = eager_attention(q, k, v, causal_additive(length, window), scaling, softcap)
    out = project_z(t, "self_attn.o_proj", layer, ctx.reshape(b, length, h * p))
    return {"normed": normed, "q_rotary": q, "k_rotary": k, "weights": weights, "output": out}


def phi3(t, cfg, x, layer):
    """models/phi3/modular_phi3.py Phi3Attention.forward: qkv_proj split as [q (H*P); k (G*P);
    v (G*P)] along the last dim, rotary on the first int(P * partial_rotary_factor) dims
    (apply_rotary_pos_emb's q_rot / q_pass), scaling P^-0.5, the sliding window of
    config.sliding_window on every layer, o_proj; after the RMSNorm input_layernorm."""
    e, h, g = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    p = cfg.get("head_dim") or e // h
    b, length, _ = x.shape
    normed = rms_norm(x, t["input_layernorm.weight"], cfg["rms_norm_eps"])
    qkv = linear(normed, t, "self_attn.qkv_proj", bias=False)
    q, k, v = qkv[..., :h * p], qkv[..., h * p:(h + g) * p], qkv[..., (h + g) * p:]
    q, k, v = (s.view(b, length, -1, p).transpose(1, 2) for s in (q, k, v))
    dim = int(p * cfg.get("partial_rotary_factor", 1.0))
    rp = rope_parameters(cfg)
    af = 1.0
    if rp["rope_type"] in ("longrope", "su", "yarn"):
        inv, af = longrope(cfg, dim, length)
    else:
        inv = inv_freq(rp, dim)
    cos, sin = rotary_cos_sin(inv, length)
    q, k = apply_rotary(q, cos * af, sin * af), apply_rotary(k, cos * af, sin * af)
    ctx, weights = eager_attention(q, k, v, causal_additive(length, cfg.get("sliding_window")), p ** -0.5)
    out = project_z(t, "self_attn.o_proj", layer, ctx.reshape(b, length, h * p))
    return {"normed": normed, "q_rotary": q, "k_rotary": k, "weights": weights, "output": out}


def llama_moe(t, cfg, x, layer):
    """The attention of olmo2 (models/olmo2/modular_olmo2.py Olmo2Attention: no input norm, q_norm /
    k_norm = Llama RMSNorm over the whole q_proj / k_proj output, before the view into heads),
    olmoe (OlmoeAttention: the same norms, after input_layernorm), mixtral (MistralAttention: the
    window of sliding_window), qwen2_moe (Qwen2MoeAttention: q/k/v biases per qkv_bias, window on
    layer_types' sliding layers) and qwen3_moe (Qwen3's per-head q_norm / k_norm)."""
    kind, e, h = cfg["model_type"], cfg["hidden_size"], cfg["num_attention_heads"]
    p, eps = cfg.get("head_dim") or e // h, cfg["rms_norm_eps"]
    b, length, _ = x.shape
    normed = None if kind == "olmo2" else rms_norm(x, t["input_layernorm.weight"], eps)
    src = x if normed is None else normed
    if kind in ("olmo2", "olmoe"):
        q = rms_norm(linear(src, t, "self_attn.q_proj"), t["self_attn.q_norm.weight"], eps)
        k = rms_norm(linear(src, t, "self_attn.k_proj"), t["self_attn.k_norm.weight"], eps)
        q, k = (s.view(b, length, -1, p).transpose(1, 2) for s in (q, k))
    else:
        qn = kn = None
        if kind == "qwen3_moe":
            qn = lambda s: rms_norm(s, t["self_attn.q_norm.weight"], eps)  # noqa: E731
            kn = lambda s: rms_norm(s, t["self_attn.k_norm.weight"], eps)  # noqa: E731
        q, k = project_heads(src, t, "q_proj", b, length, p, qn), project_heads(src, t, "k_proj", b, length, p, kn)
    v = project_heads(src, t, "v_proj", b, length, p)
    cos, sin = rotary_cos_sin(inv_freq(rope_parameters(cfg), p), length)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    window = None
    if kind == "mixtral":
        window = cfg.get("sliding_window")
    if kind == "qwen2_moe" and cfg["layer_types"][layer] == "sliding_attention":
        window = cfg["sliding_window"]
    ctx, weights = eager_attention(q, k, v, causal_additive(length, window), p ** -0.5)
    out = project_z(t, "self_attn.o_proj", layer, ctx.reshape(b, length, h * p))
    return {"normed": normed, "q_rotary": q, "k_rotary": k, "weights": weights, "output": out}


FAMILIES = {"gpt2": gpt2, "bert": bert, "llama": llama, "mistral": llama, "qwen2": llama,
            "qwen3": llama, "gpt_neox": gpt_neox, "bloom": bloom, "gemma": gemma, "gemma2": gemma,
            "gemma3_text": gemma, "phi3": phi3, "olmo2": llama_moe, "olmoe": llama_moe, "mixtral": llama_moe,
            "qwen2_moe": llama_moe, "qwen3_moe": llama_moe}
