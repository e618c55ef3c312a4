#!/usr/bin/python3
"""Golden cases for grouped-query attention, `attntrace mha --heads H --kv-heads G`.

Run:  /usr/bin/python3 tests/goldens/make_gqa_goldens.py      (rewrites tests/goldens/gqa/)

H query heads share G key/value heads: query head h uses kv head h // (H/G). The expected values
come from the numpy reference (reference.mha, which repeats the kv heads), and are cross-checked
against an independent PyTorch formulation that repeats the kv *weights* (repeat_interleave over
heads) and runs ordinary multi-head attention; with G == H also against nn.MultiheadAttention.
Params use the d2l names: W_q.weight (H*P, Eq), W_k.weight (G*P, Ek), W_v.weight (G*Pv, Ev),
W_o.weight (PO, H*Pv), each with an optional .bias.
Output format as tests/goldens/mha/cases.json (see make_mha_goldens.py).
"""
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import st  # noqa: E402
from make_mha_goldens import NP_DTYPE, write_cases  # noqa: E402

ROOT = Path(__file__).resolve().parent / "gqa"
cases = []


def torch_gqa(query, key, value, p, h, g, causal, kpm):
    """PyTorch in float64: repeat each kv head's weight rows H/G times, then plain MHA."""
    t = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in p.items()}
    unbatched = query.ndim == 2
    q_in, k_in, v_in = (torch.from_numpy(np.asarray(x, dtype=np.float64)) for x in (query, key, value))
    if unbatched:
        q_in, k_in, v_in = q_in[None], k_in[None], v_in[None]
    hp = t["W_q.weight"].shape[0] // h
    pv = t["W_v.weight"].shape[0] // g

    def rep(w, size):  # (G*size, ...) -> (H*size, ...): kv head j serves query heads j*(H/G) ...
        return w.reshape(g, size, *w.shape[1:]).repeat_interleave(h // g, dim=0).reshape(h * size, *w.shape[1:])

    wk, wv = rep(t["W_k.weight"], hp), rep(t["W_v.weight"], pv)
    bq, bk, bv = t.get("W_q.bias"), t.get("W_k.bias"), t.get("W_v.bias")
    bk = None if bk is None else rep(bk, hp)
    bv = None if bv is None else rep(bv, pv)
    b, lq, lk = q_in.shape[0], q_in.shape[1], k_in.shape[1]
    q = nn.functional.linear(q_in, t["W_q.weight"], bq).view(b, lq, h, hp).transpose(1, 2)
    k = nn.functional.linear(k_in, wk, bk).view(b, lk, h, hp).transpose(1, 2)
    v = nn.functional.linear(v_in, wv, bv).view(b, lk, h, pv).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(hp)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1), float("-inf"))
    if kpm is not None:
        s = s.masked_fill(torch.from_numpy(kpm)[:, None, None, :], float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v).transpose(1, 2).reshape(b, lq, h * pv)
    out = nn.functional.linear(ctx, t["W_o.weight"], t.get("W_o.bias"))
    if unbatched:
        return out[0].numpy(), w[0].numpy()
    return out.numpy(), w.numpy()


def gqa_case(name, *, h, g, eq=8, ek=None, ev=None, p=None, pv=None, po=None, b=2, lq=5, lk=None,
             bias=True, cross=False, causal=False, kpm=None, unbatched=False, dtype="f32"):
    case_dir = ROOT / name
    case_dir.mkdir(parents=True)
    rng = np.random.default_rng(3000 + len(cases))
    npdt = NP_DTYPE[dtype]
    lk = lq if lk is None else lk
    ek, ev = ek or eq, ev or eq
    p = p or eq // h
    pv = pv or p
    po = po or eq

    def xavier(rows, cols):
        a = math.sqrt(6.0 / (rows + cols))
        return rng.uniform(-a, a, (rows, cols)).astype(npdt)

    params = {"W_q.weight": xavier(h * p, eq), "W_k.weight": xavier(g * p, ek),
              "W_v.weight": xavier(g * pv, ev), "W_o.weight": xavier(po, h * pv)}
    if bias:
        for s, n in (("q", h * p), ("k", g * p), ("v", g * pv), ("o", po)):
            params[f"W_{s}.bias"] = (0.5 * rng.standard_normal(n)).astype(npdt)
    st.write(case_dir / "params.safetensors", params)
    lead = () if unbatched else (b,)
    query = rng.standard_normal(lead + (lq, eq)).astype(npdt)
    np.save(case_dir / "query.npy", query)
    args = ["-q", "query.npy"]
    if cross or ek != eq or ev != eq or lk != lq:
        key = rng.standard_normal(lead + (lk, ek)).astype(npdt)
        value = rng.standard_normal(lead + (lk, ev)).astype(npdt)
        np.save(case_dir / "key.npy", key)
        np.save(case_dir / "value.npy", value)
        args += ["-k", "key.npy", "-v", "value.npy"]
    else:
        key = value = query
    args += ["--heads", str(h), "--kv-heads", str(g), "--params", "params.safetensors"]
    if causal:
        args += ["--causal"]
    if kpm is not None:
        np.save(case_dir / "key_padding_mask.npy", kpm)
        args += ["--key-padding-mask", "key_padding_mask.npy"]
    if dtype == "f64":
        args += ["--dtype", "f64"]

    kwargs = dict(w_q=params["W_q.weight"], w_k=params["W_k.weight"], w_v=params["W_v.weight"],
                  w_o=params["W_o.weight"], b_q=params.get("W_q.bias"), b_k=params.get("W_k.bias"),
                  b_v=params.get("W_v.bias"), b_o=params.get("W_o.bias"))
    out, weights = reference.mha(query, key, value, **kwargs, heads=h, kv_heads=g, causal=causal,
                                 key_padding_mask=kpm)
    t_out, t_w = torch_gqa(query, key, value, params, h, g, causal, kpm)
    assert np.allclose(out, t_out, rtol=1e-12, atol=1e-12) and np.allclose(weights, t_w, rtol=1e-12, atol=1e-12), name
    if g == h and p * h == eq and pv == p and po == eq and not unbatched:
        # Plain MHA: nn.MultiheadAttention itself must agree.
        m = nn.MultiheadAttention(eq, h, bias=bias, kdim=ek, vdim=ev, batch_first=True).double()
        sd = {"q_proj_weight": params["W_q.weight"], "k_proj_weight": params["W_k.weight"],
              "v_proj_weight": params["W_v.weight"], "out_proj.weight": params["W_o.weight"]}
        if bias:
            sd["in_proj_bias"] = np.concatenate([params["W_q.bias"], params["W_k.bias"], params["W_v.bias"]])
            sd["out_proj.bias"] = params["W_o.bias"]
        if m._qkv_same_embed_dim:
            sd["in_proj_weight"] = np.concatenate([sd.pop("q_proj_weight"), sd.pop("k_proj_weight"), sd.pop("v_proj_weight")])
        m.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in sd.items()})
        tm = torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1) if causal else None
        tk = None if kpm is None else torch.from_numpy(kpm)
        mo, mw = m(*(torch.from_numpy(np.asarray(x, dtype=np.float64)) for x in (query, key, value)),
                   key_padding_mask=tk, attn_mask=tm, average_attn_weights=False)
        assert np.allclose(out, mo.detach().numpy(), rtol=1e-12, atol=1e-12), name
        assert np.allclose(weights, mw.detach().numpy(), rtol=1e-12, atol=1e-12), name
    np.save(case_dir / "out.npy", out.astype(npdt))
    np.save(case_dir / "weights.npy", weights.astype(npdt))
    np.save(case_dir / "weights_avg.npy", weights.mean(axis=-3).astype(npdt))
    cases.append({"name": name, "command": "mha", "args": args, "out": "out.npy",
                  "weights": "weights.npy", "weights_avg": "weights_avg.npy", "dtype": dtype})


def main():
    if ROOT.exists():
        shutil.rmtree(ROOT)
    ROOT.mkdir(parents=True)
    gqa_case("gqa_h4_g2", h=4, g=2)
    gqa_case("gqa_h4_g1", h=4, g=1, lq=3, lk=5, cross=True, bias=False)
    gqa_case("gqa_h4_g2_sizes_causal", h=4, g=2, eq=6, ek=5, ev=4, p=3, pv=2, po=5, lq=4, lk=6, causal=True)
    gqa_case("gqa_h6_g3_key_padding", h=6, g=3, eq=12, lq=4, lk=5,
             kpm=np.array([[0, 0, 0, 1, 1], [1, 0, 0, 0, 0]], bool))
    gqa_case("gqa_h4_g4_is_mha", h=4, g=4, lq=4, lk=6, ek=5, ev=3, causal=True)
    gqa_case("gqa_h4_g2_unbatched_f64", h=4, g=2, unbatched=True, dtype="f64")
    gqa_case("gqa_h4_g1_f64", h=4, g=1, p=3, pv=4, po=7, dtype="f64")
    write_cases(ROOT, cases)


if __name__ == "__main__":
    main()
