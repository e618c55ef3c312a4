#!/usr/bin/python3
"""Fixtures for `attntrace check`: other people's attention code, correct or with one known mistake,
written the way they wrote it (PyTorch or numpy), dumping its stages under the trace's names.

Each case writes tests/fixtures/check/<case>/:
  stages/STAGE.npy (or .json)   what that implementation computed, in its own layout and dtype
  args                          the flags of `attntrace check <case>/stages ARGS` (paths from the repo root)
  expect.json                   {"exit", "first_divergence", "code", "statuses": {stage: status},
                                 "text": [substrings of the text report]}
  x.npy, params.safetensors ... inputs the case made itself (the others reuse data/)

The expected code is the mistake this script implemented, not something attntrace printed. The
seeds' bugs are transcribed from their code (../shared/seeds): Bloem's sqrt(k) scale (000), atcold's
K and V projected with W_q (001), the blog's sum over dim=1 (002; its heads appended so it runs),
seed 004's weights @ X (single head) and its (t, s, h) head reshape (multi-head; `t,h = X.size()`
overwriting h is read as the intended number of heads, the notebook's code would not run otherwise).

Run from the repository root:  /usr/bin/python3 tests/goldens/make_check_fixtures.py
"""
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent.parent
OUT = REPO / "tests" / "fixtures" / "check"
DATA = REPO / "data"
sys.dont_write_bytecode = True
sys.path.insert(0, str(REPO / "tests" / "goldens"))
import st  # noqa: E402

MHA_STAGES = ["query", "key", "value", "q", "k", "v", "q_heads", "k_heads", "v_heads", "scores",
              "masked_scores", "weights", "context", "merged", "output"]


def rel(path):
    return str(Path(path).relative_to(REPO))


def case(name, stages, args, exit_code, first=None, code=None, text=(), statuses=None, json_stages=()):
    """Writes one case: STAGES name -> array (torch or numpy, saved in its own dtype)."""
    d = OUT / name
    (d / "stages").mkdir(parents=True, exist_ok=True)
    for stage, a in stages.items():
        a = a.detach().numpy() if torch.is_tensor(a) else np.asarray(a)
        if stage in json_stages:
            (d / "stages" / f"{stage}.json").write_text(json.dumps(
                {"shape": list(a.shape), "dtype": str(a.dtype), "data": a.tolist()}))
        else:
            np.save(d / "stages" / f"{stage}.npy", np.ascontiguousarray(a))
    (d / "args").write_text(" ".join(args) + "\n")
    if statuses is None:  # every stage given: match before the first divergence, differs from it on
        order = [s for s in MHA_STAGES if s in stages] if "q" in stages or "q_heads" in stages or "context" in stages \
            else [s for s in ["query", "key", "value", "scores", "masked_scores", "weights", "output"] if s in stages]
        statuses, seen = {}, False
        for s in order:
            seen = seen or s == first
            statuses[s] = "differs" if seen else "match"
    (d / "expect.json").write_text(json.dumps({"exit": exit_code, "first_divergence": first, "code": code,
                                               "statuses": statuses, "text": list(text)}, indent=1) + "\n")


def own(name, file, array):
    """An input the case made itself: tests/fixtures/check/NAME/FILE."""
    path = OUT / name / file
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array))
    return rel(path)


def own_params(name, tensors):
    path = OUT / name / "params.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    st.write(path, {k: (v.detach().numpy() if torch.is_tensor(v) else np.asarray(v)).astype(np.float32)
                    for k, v in tensors.items()})
    return rel(path)


def t(path):
    return torch.from_numpy(np.load(REPO / path))


def params(path):
    return {k: torch.from_numpy(v) for k, v in st.read(REPO / path).items()}


# ---- 000: Bloem -----------------------------------------------------------------------------------

def bloem(x, p, heads, scale_dim):
    """Bloem's SelfAttention.forward; scores divided by sqrt(SCALE_DIM) (his code: k, the embedding dim)."""
    b, t_, k = x.size()
    h = heads
    s = k // h
    # toqueries / tokeys / tovalues, then .view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
    queries, keys, values = (
        (x @ p[f"to{n}.weight"].T).view(b, t_, h, s).transpose(1, 2).contiguous().view(b * h, t_, s)
        for n in ("queries", "keys", "values"))
    dot = torch.bmm(queries, keys.transpose(1, 2))
    dot = dot / (scale_dim ** (1 / 2))
    scores = dot
    dot = F.softmax(dot, dim=2)
    out = torch.bmm(dot, values).view(b, h, t_, s)
    merged = out.transpose(1, 2).contiguous().view(b, t_, s * h)
    output = merged @ p["unifyheads.weight"].T + p["unifyheads.bias"]
    return {"q_heads": queries, "k_heads": keys, "scores": scores, "weights": dot,
            "context": out.reshape(b * h, t_, s), "merged": merged, "output": output}


def bloem_cases():
    x, p = t("data/bloem/x.npy"), params("data/bloem/params.safetensors")
    args = ["-q", "data/bloem/x.npy", "--heads", "2", "--params", "data/bloem/params.safetensors"]
    with torch.no_grad():
        case("correct_bloem_f32", bloem(x, p, 2, 3), args, 0, text=["(B*H, ...)", "every stage given matches"])
        bug = bloem(x, p, 2, 6)  # the notebook: dot / (k ** (1/2)), k = 6
        case("bloem_wrong_scale", bug, args, 1, "scores", "wrong_scale", text=["1/sqrt(E)"])


# ---- 001: atcold ----------------------------------------------------------------------------------

def atcold(x_q, x_kv, p, heads, k_with="W_k.weight", v_with="W_v.weight"):
    """atcold's MultiHeadAttention.forward (the notebook projects K and V with W_q)."""
    d_model = p["W_q.weight"].shape[0]
    d_k = d_model // heads

    def split_heads(x):
        return x.view(x.size(0), -1, heads, d_k).transpose(1, 2)

    q, k, v = x_q @ p["W_q.weight"].T, x_kv @ p[k_with].T, x_kv @ p[v_with].T
    Q, K, V = split_heads(q), split_heads(k), split_heads(v)
    scores = torch.matmul(Q / np.sqrt(d_k), K.transpose(2, 3))
    A = torch.nn.Softmax(dim=-1)(scores)
    H = torch.matmul(A, V)
    H_cat = H.transpose(1, 2).contiguous().view(x_q.size(0), -1, heads * d_k)
    return {"q": q, "k": k, "v": v, "q_heads": Q, "scores": scores, "weights": A, "context": H,
            "merged": H_cat, "output": H_cat @ p["W_h.weight"].T}


def atcold_cases():
    p = params("data/atcold/params.safetensors")
    with torch.no_grad():
        out = atcold(t("data/atcold/x_q.npy"), t("data/atcold/x_kv.npy"), p, 3, "W_q.weight", "W_q.weight")
        case("atcold_wrong_projection", {k: out[k] for k in ("q", "k", "v", "weights", "output")},
             ["-q", "data/atcold/x_q.npy", "-k", "data/atcold/x_kv.npy", "--heads", "3", "--params",
              "data/atcold/params.safetensors"], 1, "k", "wrong_projection", text=["K and V projected with W_q"])
        # B = 1 with the batch axis left out, head stages as (Lq, H, P): a correct implementation.
        name = "correct_heads_layout"
        x_q, x_kv = t("data/atcold/x_q.npy")[:1], t("data/atcold/x_kv.npy")[:1]
        out = atcold(x_q, x_kv, p, 3)
        stages = {"q_heads": out["q_heads"][0].transpose(0, 1), "context": out["context"][0].transpose(0, 1),
                  "weights": out["weights"][0], "output": out["output"][0]}
        case(name, stages, ["-q", own(name, "x_q.npy", x_q.numpy()), "-k", own(name, "x_kv.npy", x_kv.numpy()),
                            "--heads", "3", "--params", "data/atcold/params.safetensors"], 0,
             text=["(Lq, H, P), no batch axis", "(Lq, H, Pv), no batch axis", "read as no batch axis"])


# ---- 002: the blog --------------------------------------------------------------------------------

def blog_case():
    """The blog's per-head loop with its torch.sum(weights.unsqueeze(-1) * V_proj, dim=1); B = 1 (its
    broadcast needs B = 1 or B = seq_len), the heads appended so that torch.cat has something, and
    concatenated on the last axis (the blog's dim=1 leaves (B, h*L, dim_v), which W_O cannot take)."""
    name = "blog_sum_axis"
    p = params("data/blog/params.safetensors")
    h, dim_k, dim_v = 2, 7, 5
    W_Q = [p["W_q.weight"][i * dim_k:(i + 1) * dim_k].T for i in range(h)]
    W_K = [p["W_k.weight"][i * dim_k:(i + 1) * dim_k].T for i in range(h)]
    W_V = [p["W_v.weight"][i * dim_v:(i + 1) * dim_v].T for i in range(h)]
    W_O = p["W_o.weight"].T
    X, K, V = (t(f"data/blog/{n}.npy")[:1] for n in ("x", "k", "v"))
    attention_outputs, all_weights = [], []
    for i in range(h):
        X_proj = X.matmul(W_Q[i])
        K_proj = K.matmul(W_K[i])
        V_proj = V.matmul(W_V[i])
        weights = torch.softmax(X_proj.matmul(K_proj.transpose(-2, -1)) / math.sqrt(dim_k), dim=-1)
        head_output = torch.sum(weights.unsqueeze(-1) * V_proj, dim=1)
        attention_outputs.append(head_output)
        all_weights.append(weights)
    Y = torch.cat(attention_outputs, dim=-1).matmul(W_O)  # the blog: dim=1, which cannot multiply W_O
    stages = {"weights": torch.stack(all_weights, dim=1), "context": torch.stack(attention_outputs, dim=1), "output": Y}
    case(name, stages, ["-q", own(name, "x.npy", X.numpy()), "-k", own(name, "k.npy", K.numpy()), "-v",
                        own(name, "v.npy", V.numpy()), "--heads", "2", "--params", "data/blog/params.safetensors"],
         1, "context", "unknown", text=["summed over the query axis"])


# ---- 003: d2l (correct, with its -1e6 fill) --------------------------------------------------------

def d2l_case():
    p = params("data/d2l/params.safetensors")
    queries, keys, values = (t(f"data/d2l/{n}.npy") for n in ("queries", "keys", "values"))
    heads, valid_lens = 5, torch.tensor([3, 2])

    def transpose_qkv(X):
        X = X.reshape(X.shape[0], X.shape[1], heads, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    q, k, v = (transpose_qkv(x @ p[f"W_{n}.weight"].T) for x, n in ((queries, "q"), (keys, "k"), (values, "v")))
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    lens = torch.repeat_interleave(torch.repeat_interleave(valid_lens, heads), scores.shape[1])
    flat = scores.reshape(-1, scores.shape[-1]).clone()
    flat[~(torch.arange(flat.shape[1])[None, :] < lens[:, None])] = -1e6  # d2l's _sequence_mask
    masked = flat.reshape(scores.shape)
    w = F.softmax(masked, dim=-1)
    ctx = torch.bmm(w, v)
    merged = ctx.reshape(-1, heads, ctx.shape[1], ctx.shape[2]).permute(0, 2, 1, 3).reshape(ctx.shape[0] // heads, ctx.shape[1], -1)
    B = queries.shape[0]
    stages = {"masked_scores": masked.reshape(B, heads, *masked.shape[1:]), "weights": w.reshape(B, heads, *w.shape[1:]),
              "output": merged @ p["W_o.weight"].T}
    case("correct_d2l_fill", stages, ["-q", "data/d2l/queries.npy", "-k", "data/d2l/keys.npy", "-v", "data/d2l/values.npy",
                                      "--heads", "5", "--params", "data/d2l/params.safetensors", "--valid-lens", "3,2"],
         0, text=["masked scores as a -1e+06 fill"])


# ---- 004 ------------------------------------------------------------------------------------------

def seed004_cases():
    x, p = t("data/seed004/x.npy"), params("data/seed004/params.safetensors")
    args = ["-q", "data/seed004/x.npy", "--params", "data/seed004/params.safetensors", "--no-out-proj"]
    # Single head: result = torch.mm(weights, X).
    k = x.shape[1]
    Q, K = x @ p["toqueries.weight"].T, x @ p["tokeys.weight"].T
    weights = F.softmax(torch.mm(Q, K.t()) / (k ** (1 / 2)), dim=1)
    case("seed004_context_from_input", {"q": Q, "weights": weights, "output": torch.mm(weights, x)},
         args + ["--heads", "1"], 1, "output", "context_from_input", text=["value input itself"])
    # Multi-head: queries = Q.reshape(t, s, h), result reshaped back as (t, s, h).
    t_, heads = x.shape[0], 2
    s = k // heads
    Q, K, V = x @ p["toqueries.weight"].T, x @ p["tokeys.weight"].T, x @ p["tovalues.weight"].T
    b_Q, b_K, b_V = (m.reshape(t_, s, heads).transpose(1, 2).transpose(0, 1) for m in (Q, K, V))
    w = F.softmax(torch.bmm(b_Q, b_K.transpose(1, 2)) / (s ** (1 / 2)), dim=2)
    out = torch.bmm(w, b_V)
    result = out.transpose(0, 1).transpose(1, 2).reshape(t_, s * heads)
    case("seed004_head_split", {"q": Q, "q_heads": b_Q, "weights": w, "context": out, "output": result},
         args + ["--heads", "2"], 1, "q_heads", "head_split", text=["(L, P, H)"])


# ---- the other codes, in numpy (float64) or PyTorch (float32) ----------------------------------------

def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def np_mha(x, p, heads, *, softmax_axis=-1, transpose_k=False, kpm=None, invert=False, skip_b_v=False, factor=1.0,
           merge_as_lph=False):
    """A learner's numpy multi-head attention (torch layout weights (out, in), biases), one optional mistake."""
    B, L, E = x.shape
    P = p["w_q"].shape[0] // heads
    q = x @ p["w_q"].T + p["b_q"]
    k = x @ (p["w_k"] if transpose_k else p["w_k"].T) + p["b_k"]
    v = x @ p["w_v"].T + (0 if skip_b_v else p["b_v"])
    qh, kh, vh = (m.reshape(B, L, heads, P).transpose(0, 2, 1, 3) for m in (q, k, v))
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(P)
    masked = scores
    if kpm is not None:
        ignore = ~kpm if invert else kpm
        masked = np.where(ignore[:, None, None, :], -np.inf, scores)
    w = softmax(masked, softmax_axis)
    ctx = w @ vh
    # merge_as_lph: the heads merged as (L, P, H), column p*H + h holding head h's column p (the
    # context's axes put in the wrong order before the reshape)
    merged = (ctx.transpose(0, 2, 3, 1) if merge_as_lph else ctx.transpose(0, 2, 1, 3)).reshape(B, L, heads * P)
    out = (merged @ p["w_o"].T + p["b_o"]) * factor
    return {"q": q, "k": k, "v": v, "q_heads": qh, "scores": scores, "masked_scores": masked, "weights": w,
            "context": ctx, "merged": merged, "output": out}


def np_params(rng, E):
    """Float32-representable values (the .safetensors holds float32), used in float64."""
    p = {n: rng.standard_normal((E, E)) / math.sqrt(E) for n in ("w_q", "w_k", "w_v", "w_o")} | \
        {n: 0.3 * rng.standard_normal(E) for n in ("b_q", "b_k", "b_v", "b_o")}
    return {n: v.astype(np.float32).astype(np.float64) for n, v in p.items()}


def torch_names(p):
    return {"in_proj_weight": np.concatenate([p["w_q"], p["w_k"], p["w_v"]]),
            "in_proj_bias": np.concatenate([p["b_q"], p["b_k"], p["b_v"]]),
            "out_proj.weight": p["w_o"], "out_proj.bias": p["b_o"]}


def numpy_cases():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 5, 8))
    p = np_params(rng, 8)
    for name, kw, keep, first, code, text in (
            ("softmax_axis", dict(softmax_axis=-2), ("q", "scores", "weights", "output"), "weights", "softmax_axis", ["query axis"]),
            ("transposed_weight", dict(transpose_k=True), ("q", "k", "scores", "output"), "k", "transposed_weight", ["W_k used as stored"]),
            ("missing_bias", dict(skip_b_v=True), ("q", "k", "v", "context", "output"), "v", "missing_bias", ["b_v left out"]),
            ("unknown_factor", dict(factor=2.0), ("q", "weights", "output"), "output", "unknown", ["constant factor"]),
            ("head_merge", dict(merge_as_lph=True), ("q_heads", "context", "merged", "output"), "merged", "head_merge",
             ["merged as (L, P, H)"])):
        out = np_mha(x, p, 2, **kw)
        case(name, {s: out[s] for s in keep}, ["-q", own(name, "x.npy", x), "--heads", "2", "--params",
                                               own_params(name, torch_names(p))], 1, first, code, text=text)
    name = "mask_inverted"
    kpm = np.array([[False, False, False, True, True], [False, False, False, False, True]])
    out = np_mha(x, p, 2, kpm=kpm, invert=True)
    case(name, {s: out[s] for s in ("scores", "masked_scores", "weights", "output")},
         ["-q", own(name, "x.npy", x), "--heads", "2", "--params", own_params(name, torch_names(p)),
          "--key-padding-mask", own(name, "kpm.npy", kpm)], 1, "masked_scores", "mask_inverted")


def sdpa_cases():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4, 6), (2, 3, 5, 6), (2, 3, 5, 4)))
    name = "missing_scale"
    scores = q @ np.swapaxes(k, -1, -2)  # no / sqrt(d)
    w = softmax(scores, -1)
    args = ["--sdpa", "-q", own(name, "q.npy", q), "-k", own(name, "k.npy", k), "-v", own(name, "v.npy", v)]
    case(name, {"scores": scores, "weights": w.astype(np.float32), "output": w @ v}, args, 1, "scores", "missing_scale",
         json_stages=("weights",))
    # PyTorch 1.13, float32, causal with torch.triu(ones, diagonal=0) as the mask: the diagonal is masked too.
    name = "causal_offset"
    tq, tk, tv = (torch.from_numpy(a).float() for a in (q, k[:, :, :4], v[:, :, :4]))
    scores = tq @ tk.transpose(-2, -1) / math.sqrt(6)
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=0)
    masked = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(masked, dim=-1)  # row 0 has no key: NaN in PyTorch
    args = ["--sdpa", "-q", own(name, "q.npy", q), "-k", own(name, "k.npy", k[:, :, :4]), "-v",
            own(name, "v.npy", v[:, :, :4]), "--causal"]
    case(name, {"scores": scores, "masked_scores": masked, "weights": w, "output": w @ tv}, args, 1, "masked_scores",
         "causal_offset", text=["excludes the diagonal"])
    # Correct, PyTorch 1.13 float32: a fully masked query row gives NaN weights and output, and the
    # masked scores are written with transformers' finfo.min.
    name = "correct_sdpa_conventions"
    bad = np.zeros((4, 5), dtype=bool)
    bad[1, :] = True
    bad[2, 3:] = True
    tq, tk, tv = (torch.from_numpy(a).float() for a in (q, k, v))
    scores = tq @ tk.transpose(-2, -1) / math.sqrt(6)
    w = torch.softmax(scores.masked_fill(torch.from_numpy(bad), float("-inf")), dim=-1)
    stages = {"scores": scores, "masked_scores": scores.masked_fill(torch.from_numpy(bad), torch.finfo(torch.float32).min),
              "weights": w, "output": w @ tv}
    assert torch.isnan(w).any()
    args = ["--sdpa", "-q", own(name, "q.npy", q), "-k", own(name, "k.npy", k), "-v", own(name, "v.npy", v),
            "--attn-mask", own(name, "mask.npy", bad)]
    case(name, stages, args, 0, text=["masked scores as a -3.40282e+38 fill", "rows with no allowed key as NaN"])


# ---- PyTorch's own nn.MultiheadAttention (correct): weights averaged over the heads by default ----

def torch_mha_case():
    name = "correct_torch_mha"
    torch.manual_seed(7)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        m.in_proj_bias.normal_(0, 0.3)
        m.out_proj.bias.normal_(0, 0.3)
        x = torch.randn(2, 5, 8)
        kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
        out, w = m(x, x, x, key_padding_mask=kpm)  # w: (B, Lq, Lk), the mean over the heads
    assert w.shape == (2, 5, 5)
    case(name, {"weights": w, "output": out},
         ["-q", own(name, "x.npy", x.numpy()), "--heads", "2", "--params", own_params(name, m.state_dict()),
          "--key-padding-mask", own(name, "kpm.npy", kpm.numpy())], 0, text=["averaged over the heads"])


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    bloem_cases()
    atcold_cases()
    blog_case()
    d2l_case()
    seed004_cases()
    numpy_cases()
    sdpa_cases()
    torch_mha_case()
    files = [f for f in OUT.rglob("*") if f.is_file()]
    print(f"{len(list(OUT.iterdir()))} cases, {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
