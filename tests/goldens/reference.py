"""A numpy reference for attntrace's attention (float64 throughout), independent of PyTorch.

Legend: B batch, Lq/Lk query/key lengths, E embed dim, H heads, G kv heads, P head dim,
Pv value head dim, PO output dim.

It implements the contract of `attntrace sdpa` / `attntrace mha` where PyTorch 1.13 cannot:
  - a query row with no allowed key gets all-zero weights and a zero context (PyTorch >= 2.5
    semantics; 1.13 gives NaN);
  - grouped-query attention: query head h uses kv head h // (H/G);
  - d2l's valid_lens, (B,) or (B, Lq): keys at positions >= the valid length are masked.
Masks combine: allowed = AND of every bool mask (true = NOT allowed in the files), float masks are
added to the scores.
"""
import math

import numpy as np


def masked_softmax_attention(q, k, v, scale, allowed=None, additive=None):
    """q (..., Lq, P), k (..., Lk, P), v (..., Lk, Pv) -> context (..., Lq, Pv), weights (..., Lq, Lk).

    ALLOWED: bool broadcastable to (..., Lq, Lk), true = may attend. ADDITIVE: float, added."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if additive is not None:
        scores = scores + np.asarray(additive, dtype=np.float64)
    ok = np.ones(scores.shape, dtype=bool) if allowed is None else np.broadcast_to(allowed, scores.shape)
    ok = ok & (scores > -np.inf)
    masked = np.where(ok, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(ok, np.exp(masked - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return np.matmul(weights, v), weights


def split_mask(mask):
    """A mask file's array -> (allowed bool or None, additive float or None)."""
    if mask is None:
        return None, None
    mask = np.asarray(mask)
    if mask.dtype == np.bool_:
        return ~mask, None
    return None, mask.astype(np.float64)


def causal_allowed(lq, lk):
    """(Lq, Lk): query i sees keys <= i (top-left aligned, PyTorch's is_causal)."""
    return np.tril(np.ones((lq, lk), dtype=bool))


def sdpa(q, k, v, scale=None, causal=False, attn_mask=None):
    """Q (..., Lq, E), K (..., Lk, E), V (..., Lk, Ev) -> out (..., Lq, Ev), weights (..., Lq, Lk)."""
    q = np.asarray(q, dtype=np.float64)
    lq, lk = q.shape[-2], np.shape(k)[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    allowed, additive = split_mask(attn_mask)
    if causal:
        c = causal_allowed(lq, lk)
        allowed = c if allowed is None else allowed & c
    return masked_softmax_attention(q, k, v, scale, allowed, additive)


def mha(query, key=None, value=None, *, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, w_o=None,
        b_o=None, heads, kv_heads=None, scale=None, causal=False, attn_mask=None,
        key_padding_mask=None, valid_lens=None):
    """torch.nn.MultiheadAttention(batch_first=True) generalised (d2l shapes, GQA, empty rows).

    query (B, Lq, Eq) or (Lq, Eq); key (B, Lk, Ek); value (B, Lk, Ev); defaults key=query, value=key.
    w_q (H*P, Eq), w_k (G*P, Ek), w_v (G*Pv, Ev), w_o (PO, H*Pv) or None (no output projection).
    Returns out (B, Lq, PO) and per-head weights (B, H, Lq, Lk) (no batch axis for 2-D input)."""
    key = query if key is None else key
    value = key if value is None else value
    query, key, value = (np.asarray(t, dtype=np.float64) for t in (query, key, value))
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query[None], key[None], value[None]
    h = heads
    g = h if kv_heads is None else kv_heads
    assert h % g == 0
    b, lq, _ = query.shape
    lk = key.shape[1]
    p = w_q.shape[0] // h
    pv = w_v.shape[0] // g
    assert w_q.shape[0] == h * p and w_k.shape[0] == g * p and w_v.shape[0] == g * pv

    def project(x, w, bias):
        y = x @ np.asarray(w, dtype=np.float64).T
        return y if bias is None else y + np.asarray(bias, dtype=np.float64)

    q = project(query, w_q, b_q).reshape(b, lq, h, p).transpose(0, 2, 1, 3)      # (B, H, Lq, P)
    k = project(key, w_k, b_k).reshape(b, lk, g, p).transpose(0, 2, 1, 3)        # (B, G, Lk, P)
    v = project(value, w_v, b_v).reshape(b, lk, g, pv).transpose(0, 2, 1, 3)     # (B, G, Lk, Pv)
    k = np.repeat(k, h // g, axis=1)                                             # (B, H, Lk, P)
    v = np.repeat(v, h // g, axis=1)                                             # (B, H, Lk, Pv)

    allowed, additive = split_mask(attn_mask)
    allowed = np.ones((b, h, lq, lk), dtype=bool) if allowed is None else np.broadcast_to(allowed, (b, h, lq, lk)).copy()
    if causal:
        allowed &= causal_allowed(lq, lk)
    if key_padding_mask is not None:
        kpm = np.asarray(key_padding_mask).astype(bool).reshape(b, lk)
        allowed &= ~kpm[:, None, None, :]
    if valid_lens is not None:
        vl = np.asarray(valid_lens)
        pos = np.arange(lk)
        if vl.ndim == 1:
            allowed &= (pos[None, :] < vl[:, None])[:, None, None, :]
        else:
            allowed &= (pos[None, None, :] < vl[:, :, None])[:, None, :, :]
    scale = 1.0 / math.sqrt(p) if scale is None else scale
    ctx, weights = masked_softmax_attention(q, k, v, scale, allowed, additive)   # (B, H, Lq, Pv)
    merged = ctx.transpose(0, 2, 1, 3).reshape(b, lq, h * pv)                   # (B, Lq, H*Pv)
    out = merged if w_o is None else project(merged, w_o, b_o)
    if unbatched:
        return out[0], weights[0]
    return out, weights


def torch_state_to_weights(state, embed_dim=None):
    """PyTorch nn.MultiheadAttention state_dict (numpy arrays) -> mha() keyword arguments."""
    if "in_proj_weight" in state:
        w_q, w_k, w_v = np.split(state["in_proj_weight"], 3, axis=0)
    else:
        w_q, w_k, w_v = state["q_proj_weight"], state["k_proj_weight"], state["v_proj_weight"]
    out = dict(w_q=w_q, w_k=w_k, w_v=w_v, w_o=state.get("out_proj.weight"), b_o=state.get("out_proj.bias"))
    if "in_proj_bias" in state:
        e = w_q.shape[0]
        out.update(b_q=state["in_proj_bias"][:e], b_k=state["in_proj_bias"][e:2 * e],
                   b_v=state["in_proj_bias"][2 * e:])
    return out
