#!/usr/bin/python3
"""Golden cases for `attntrace mha` and `attntrace sdpa`, recorded from PyTorch 1.13
(torch.nn.MultiheadAttention(batch_first=True)) and from the numpy reference in reference.py.

Run:  /usr/bin/python3 tests/goldens/make_mha_goldens.py      (rewrites tests/goldens/mha/)

Each case is a directory tests/goldens/mha/<case>/ with the inputs (query.npy, key.npy,
value.npy, masks), params.safetensors under PyTorch's own state_dict names, and the expected
out.npy, weights.npy (per head) and weights_avg.npy (PyTorch's averaged weights).
tests/goldens/mha/cases.json lists them as
  {"name", "command": "mha"|"sdpa", "args": [CLI args relative to the case dir],
   "out", "weights", "weights_avg" (null for sdpa), "dtype": "f32"|"f64"}
and tests/goldens/mha/bad_cases.json the bad inputs (files in tests/goldens/mha/bad/) with their
expected exit codes and the text their one-line error must contain.

Notes on the expected values:
  - PyTorch initialises biases to zero; the cases overwrite them with N(0, 0.5^2) so a missing
    bias is caught.
  - PyTorch 1.13 has no is_causal for MHA: causal cases pass attn_mask=triu(ones(Lq, Lk), 1).
  - A 4-D (B, H, Lq, Lk) mask is saved for attntrace and reshaped to (B*H, Lq, Lk) for PyTorch.
  - A query row with no allowed key: PyTorch 1.13 gives NaN, attntrace's contract (PyTorch >= 2.5)
    is zero weights and a zero context, so out = 0 @ W_o^T + b_o = b_o. Those rows come from the
    numpy reference; every other value is PyTorch's, and is checked to agree with the reference.
  - Custom --scale: MHA has no scale argument, so PyTorch runs with W_q, b_q multiplied by
    scale*sqrt(P) (the same scores); the saved params are the unmodified ones.
"""
import json
import math
import os
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

ROOT = Path(__file__).resolve().parent / "mha"
TOL = {"f32": dict(rtol=1e-5, atol=1e-6), "f64": dict(rtol=1e-12, atol=1e-12)}
NP_DTYPE = {"f32": np.float32, "f64": np.float64}
TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64}

cases = []


def save(case_dir, name, array):
    np.save(case_dir / name, np.ascontiguousarray(array))


def make_module(e, h, *, kdim=None, vdim=None, bias=True, dtype="f32", add_bias_kv=False, add_zero_attn=False):
    m = nn.MultiheadAttention(e, h, bias=bias, kdim=kdim, vdim=vdim, batch_first=True,
                              add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
    if dtype == "f64":
        m.double()
    m.train()  # dropout is 0; train mode keeps PyTorch on its reference (non fast-path) code
    return m


def state_numpy(m):
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def fill_empty(expected, reference_value, what, case):
    """PyTorch's NaN rows -> the reference's; everything else must already agree."""
    nan = np.isnan(expected)
    tol = TOL["f64"] if expected.dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    if not np.allclose(expected[~nan], reference_value[~nan], **tol):
        diff = np.abs(expected[~nan] - reference_value[~nan]).max()
        raise SystemExit(f"{case}: {what}: PyTorch and the numpy reference differ by {diff}")
    out = expected.copy()
    out[nan] = reference_value[nan]
    return out


def mha_case(name, *, e, h, b=2, lq=5, lk=None, kdim=None, vdim=None, bias=True, dtype="f32",
             cross=False, causal=False, attn_mask=None, key_padding_mask=None, unbatched=False,
             params_format="torch", prefix=None, scale=None, extra_args=(), expect_empty=False,
             add_bias_kv=False, add_zero_attn=False, need_weights=True):
    """ATTN_MASK / KEY_PADDING_MASK: callables (generator args) returning the numpy mask.
    ADD_BIAS_KV / ADD_ZERO_ATTN: the module's own options (bias_k / bias_v in the state dict,
    --add-zero-attn); the numpy reference has neither, so PyTorch alone is the reference and the
    weights have Lk + 1 or Lk + 2 columns. NEED_WEIGHTS False: PyTorch runs with need_weights=False,
    the case lists no weights and attntrace runs without --attn-weights (its tiled path)."""
    case_dir = ROOT / name
    case_dir.mkdir(parents=True)
    seed = 1000 + len(cases)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    lk = lq if lk is None else lk
    m = make_module(e, h, kdim=kdim, vdim=vdim, bias=bias, dtype=dtype, add_bias_kv=add_bias_kv,
                    add_zero_attn=add_zero_attn)
    tdt = TORCH_DTYPE[dtype]
    qshape = (lq, e) if unbatched else (b, lq, e)
    query = torch.randn(qshape, dtype=tdt)
    if cross or kdim or vdim or lk != lq:
        kshape = (lk, kdim or e) if unbatched else (b, lk, kdim or e)
        vshape = (lk, vdim or e) if unbatched else (b, lk, vdim or e)
        key = torch.randn(kshape, dtype=tdt)
        value = torch.randn(vshape, dtype=tdt)
    else:
        key = value = query
    save(case_dir, "query.npy", query.numpy())
    args = ["-q", "query.npy"]
    if key is not query:
        save(case_dir, "key.npy", key.numpy())
        save(case_dir, "value.npy", value.numpy())
        args += ["-k", "key.npy", "-v", "value.npy"]
    args += ["--heads", str(h)]

    # Parameters, under the requested naming scheme.
    state = state_numpy(m)
    if params_format == "torch":
        tensors = dict(state)
    elif params_format == "d2l":
        w = reference.torch_state_to_weights(state)
        tensors = {"W_q.weight": w["w_q"], "W_k.weight": w["w_k"], "W_v.weight": w["w_v"],
                   "W_o.weight": w["w_o"]}
        for s in "qkvo":
            if w.get(f"b_{s}") is not None:
                tensors[f"W_{s}.bias"] = w[f"b_{s}"]
    else:
        tensors = dict(state)
    if prefix:
        tensors = {prefix + k: v for k, v in tensors.items()}
        # A neighbouring layer's tensors in the same checkpoint: must be ignored.
        tensors["encoder.layers.0.linear1.weight"] = rng.standard_normal((4, e)).astype(NP_DTYPE[dtype])
        tensors["encoder.layers.1.self_attn.in_proj_weight"] = rng.standard_normal((3 * e, e)).astype(NP_DTYPE[dtype])
    if params_format == "json":
        with open(case_dir / "params.json", "w") as f:
            json.dump({k: v.tolist() for k, v in sorted(tensors.items())}, f)
        args += ["--params", "params.json"]
    elif params_format == "npydir":
        (case_dir / "params").mkdir()
        for k, v in tensors.items():
            save(case_dir / "params", k + ".npy", v)
        args += ["--params", "params"]
    else:
        st.write(case_dir / "params.safetensors", tensors)
        args += ["--params", "params.safetensors"]
    if prefix:
        args += ["--prefix", prefix]

    # Masks: attntrace's files and PyTorch's equivalents.
    np_attn = None
    torch_attn = None
    if attn_mask is not None:
        np_attn = attn_mask(rng, b, h, lq, lk)
        if np_attn.dtype != np.bool_:
            np_attn = np_attn.astype(NP_DTYPE[dtype])
        save(case_dir, "attn_mask.npy", np_attn)
        args += ["--attn-mask", "attn_mask.npy"]
        t = torch.from_numpy(np_attn)
        if t.dim() == 4:  # (B or 1, H or 1, Lq, Lk) -> (B*H, Lq, Lk)
            t = t.expand(b, h, lq, lk).reshape(b * h, lq, lk)
        torch_attn = t
    if causal:
        args += ["--causal"]
        c = torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1)
        if torch_attn is None:
            torch_attn = c
        elif torch_attn.dtype == torch.bool:
            torch_attn = torch_attn | c
        else:
            torch_attn = torch_attn.masked_fill(c, float("-inf"))
    np_kpm = None
    torch_kpm = None
    if key_padding_mask is not None:
        np_kpm = key_padding_mask(rng, b, lk)
        save(case_dir, "key_padding_mask.npy", np_kpm)
        args += ["--key-padding-mask", "key_padding_mask.npy"]
        torch_kpm = torch.from_numpy(np_kpm.astype(bool))
    if scale is not None:
        args += ["--scale", repr(scale)]
    if dtype == "f64":
        args += ["--dtype", "f64"]
    if add_zero_attn:
        args += ["--add-zero-attn"]
    args += list(extra_args)

    # PyTorch.
    p = e // h
    run = m
    if scale is not None:
        run = make_module(e, h, kdim=kdim, vdim=vdim, bias=bias, dtype=dtype)
        run.load_state_dict(m.state_dict())
        factor = scale * math.sqrt(p)
        with torch.no_grad():
            if run._qkv_same_embed_dim:
                run.in_proj_weight[:e] *= factor
            else:
                run.q_proj_weight *= factor
            if bias:
                run.in_proj_bias[:e] *= factor
    out, w = run(query, key, value, key_padding_mask=torch_kpm, attn_mask=torch_attn,
                 need_weights=True, average_attn_weights=False)
    _, w_avg = run(query, key, value, key_padding_mask=torch_kpm, attn_mask=torch_attn,
                   need_weights=True, average_attn_weights=True)
    out, w, w_avg = (t.detach().numpy() for t in (out, w, w_avg))
    if add_bias_kv or add_zero_attn:
        extended_case(name, case_dir, args, dtype, run, (query, key, value, torch_kpm, torch_attn), out, w, w_avg,
                      need_weights)
        return

    # The numpy reference, for the rows PyTorch 1.13 leaves NaN, and as a cross-check.
    ref_out, ref_w = reference.mha(query.numpy(), key.numpy(), value.numpy(),
                                   **reference.torch_state_to_weights(state), heads=h, scale=scale,
                                   causal=causal, attn_mask=np_attn, key_padding_mask=np_kpm)
    ref_avg = ref_w.mean(axis=-3)
    if expect_empty != bool(np.isnan(out).any()):
        raise SystemExit(f"{name}: expected empty rows: {expect_empty}, PyTorch NaN: {np.isnan(out).any()}")
    out = fill_empty(out, ref_out, "out", name)
    w = fill_empty(w, ref_w, "weights", name)
    w_avg = fill_empty(w_avg, ref_avg, "weights_avg", name)
    if expect_empty:
        assert (w == 0).all(axis=-1).any()
    save(case_dir, "out.npy", out.astype(NP_DTYPE[dtype]))
    save(case_dir, "weights.npy", w.astype(NP_DTYPE[dtype]))
    save(case_dir, "weights_avg.npy", w_avg.astype(NP_DTYPE[dtype]))
    cases.append({"name": name, "command": "mha", "args": args, "out": "out.npy",
                  "weights": "weights.npy", "weights_avg": "weights_avg.npy", "dtype": dtype})


def extended_case(name, case_dir, args, dtype, run, inputs, out, w, w_avg, need_weights):
    """An add_bias_kv / add_zero_attn case: PyTorch's values as they are (no empty rows: the
    appended keys are never masked)."""
    assert not np.isnan(out).any(), name
    if not need_weights:
        query, key, value, kpm, attn = inputs
        out_nw, none = run(query, key, value, key_padding_mask=kpm, attn_mask=attn, need_weights=False)
        assert none is None
        out_nw = out_nw.detach().numpy()
        assert np.allclose(out_nw, out, **TOL[dtype]), name
        save(case_dir, "out.npy", out_nw.astype(NP_DTYPE[dtype]))
        cases.append({"name": name, "command": "mha", "args": args, "out": "out.npy",
                      "weights": None, "weights_avg": None, "dtype": dtype})
        return
    save(case_dir, "out.npy", out.astype(NP_DTYPE[dtype]))
    save(case_dir, "weights.npy", w.astype(NP_DTYPE[dtype]))
    save(case_dir, "weights_avg.npy", w_avg.astype(NP_DTYPE[dtype]))
    cases.append({"name": name, "command": "mha", "args": args, "out": "out.npy",
                  "weights": "weights.npy", "weights_avg": "weights_avg.npy", "dtype": dtype})


def sdpa_case(name, *, lead=(2, 3), lq=4, lk=6, e=5, ev=3, dtype="f32", causal=False,
              attn_mask=None, scale=None, expect_empty=False):
    """numpy reference, cross-checked against PyTorch's softmax(QK^T*scale + mask)V."""
    case_dir = ROOT / name
    case_dir.mkdir(parents=True)
    seed = 2000 + len(cases)
    rng = np.random.default_rng(seed)
    npdt = NP_DTYPE[dtype]
    q = rng.standard_normal(lead + (lq, e)).astype(npdt)
    k = rng.standard_normal(lead + (lk, e)).astype(npdt)
    v = rng.standard_normal(lead + (lk, ev)).astype(npdt)
    for fname, t in (("q.npy", q), ("k.npy", k), ("v.npy", v)):
        save(case_dir, fname, t)
    args = ["-q", "q.npy", "-k", "k.npy", "-v", "v.npy"]
    mask = None
    if attn_mask is not None:
        mask = attn_mask(rng, lead, lq, lk)
        if mask.dtype != np.bool_:
            mask = mask.astype(npdt)
        save(case_dir, "attn_mask.npy", mask)
        args += ["--attn-mask", "attn_mask.npy"]
    if causal:
        args += ["--causal"]
    if scale is not None:
        args += ["--scale", repr(scale)]
    if dtype == "f64":
        args += ["--dtype", "f64"]
    out, w = reference.sdpa(q, k, v, scale=scale, causal=causal, attn_mask=mask)

    # PyTorch, computed the textbook way (1.13 has no F.scaled_dot_product_attention).
    tq, tk, tv = (torch.from_numpy(t).double() for t in (q, k, v))
    s = (1 / math.sqrt(e) if scale is None else scale) * tq @ tk.transpose(-1, -2)
    if mask is not None:
        tm = torch.from_numpy(mask)
        s = s.masked_fill(tm, float("-inf")) if mask.dtype == np.bool_ else s + tm.double()
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1), float("-inf"))
    tw = torch.softmax(s, dim=-1)
    tout = (tw @ tv).numpy()
    if expect_empty != bool(np.isnan(tout).any()):
        raise SystemExit(f"{name}: expected empty rows: {expect_empty}")
    fill_empty(tout, out, "out", name)
    fill_empty(tw.numpy(), w, "weights", name)
    save(case_dir, "out.npy", out.astype(npdt))
    save(case_dir, "weights.npy", w.astype(npdt))
    cases.append({"name": name, "command": "sdpa", "args": args, "out": "out.npy",
                  "weights": "weights.npy", "weights_avg": None, "dtype": dtype})


# ---- masks -------------------------------------------------------------------------------------

def bool_mask_no_empty_row(rng, shape):
    """Random bool mask (true = not allowed) where every row keeps at least one allowed key."""
    m = rng.random(shape) < 0.4
    lk = shape[-1]
    keep = rng.integers(0, lk, size=shape[:-1])
    np.put_along_axis(m, keep[..., None], False, axis=-1)
    return m


def kpm_some(rng, b, lk):
    m = np.zeros((b, lk), dtype=bool)
    m[0, 0] = True
    m[-1, lk - 2:] = True
    return m


def make_bad_cases():
    """Inputs that must be rejected, and the expected exit codes and error text."""
    bad = ROOT / "bad"
    bad.mkdir(parents=True)
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    f = np.float32

    def arr(*shape):
        return rng.standard_normal(shape).astype(f)

    save(bad, "x.npy", arr(2, 5, 8))
    save(bad, "key_b3.npy", arr(3, 5, 8))
    save(bad, "key_l5.npy", arr(2, 5, 8))
    save(bad, "value_l4.npy", arr(2, 4, 8))
    save(bad, "mask_3x4.npy", np.zeros((3, 4), dtype=bool))
    save(bad, "kpm_2x4.npy", np.zeros((2, 4), dtype=bool))
    save(bad, "q_e4.npy", arr(2, 4, 4))
    save(bad, "k_e5.npy", arr(2, 6, 5))
    save(bad, "v_l6.npy", arr(2, 6, 3))
    st.write(bad / "params.safetensors", state_numpy(make_module(8, 2)))
    good = {"W_q.weight": arr(8, 8), "W_k.weight": arr(8, 8), "W_v.weight": arr(8, 8), "W_o.weight": arr(8, 8)}
    st.write(bad / "params_wk_8x7.safetensors", {**good, "W_k.weight": arr(8, 7)})
    st.write(bad / "params_no_wk.safetensors", {k: v for k, v in good.items() if k != "W_k.weight"})
    st.write(bad / "params_no_wo.safetensors", {k: v for k, v in good.items() if k != "W_o.weight"})
    # GQA with H=4, G=2, P=2: W_k must be (4, 8), here it is (8, 8).
    st.write(bad / "params_gqa_wk_8x8.safetensors", {**good, "W_v.weight": arr(4, 8)})
    with_kv = state_numpy(make_module(8, 2, add_bias_kv=True))
    st.write(bad / "params_bias_k_only.safetensors", {k: v for k, v in with_kv.items() if k != "bias_v"})
    st.write(bad / "params_bias_k_1x1x6.safetensors", {**with_kv, "bias_k": arr(1, 1, 6)})

    base = ["mha", "-q", "x.npy"]
    # A shape error names the offending tensor's shape and the shape it must agree with.
    entries = [
        # name, args, allowed exit codes, text the one-line error must contain
        ("heads_not_dividing_params", base + ["--heads", "3", "--params", "params.safetensors"], [3], ["("]),
        ("heads_not_dividing_seed", base + ["--heads", "3", "--seed", "1"], [2, 3], []),
        ("batch_mismatch", base + ["-k", "key_b3.npy", "--heads", "2", "--params", "params.safetensors"], [3], ["(3, 5, 8)", "(2, 5, 8)"]),
        ("length_mismatch", base + ["-k", "key_l5.npy", "-v", "value_l4.npy", "--heads", "2", "--params", "params.safetensors"], [3], ["(2, 4, 8)", "(2, 5, 8)"]),
        ("attn_mask_wrong_shape", base + ["--heads", "2", "--params", "params.safetensors", "--attn-mask", "mask_3x4.npy"], [3], ["(3, 4)", "(2, 2, 5, 5)"]),
        ("key_padding_mask_wrong_shape", base + ["--heads", "2", "--params", "params.safetensors", "--key-padding-mask", "kpm_2x4.npy"], [3], ["(2, 4)", "(2, 5)"]),
        ("params_wrong_shape", base + ["--heads", "2", "--params", "params_wk_8x7.safetensors"], [3], ["W_k.weight", "(8, 7)", "(8, 8)"]),
        ("params_missing", base + ["--heads", "2", "--params", "params_no_wk.safetensors"], [3], ["W_k"]),
        ("params_no_out_proj", base + ["--heads", "2", "--params", "params_no_wo.safetensors"], [3], []),
        ("gqa_params_wrong_shape", base + ["--heads", "4", "--kv-heads", "2", "--params", "params_gqa_wk_8x8.safetensors"], [3], ["W_k.weight", "(8, 8)", "(4, 8)"]),
        ("heads_zero", base + ["--heads", "0", "--params", "params.safetensors"], [2, 3], []),
        ("kv_heads_not_dividing", base + ["--heads", "4", "--kv-heads", "3", "--seed", "1"], [2, 3], []),
        ("sdpa_embed_mismatch", ["sdpa", "-q", "q_e4.npy", "-k", "k_e5.npy", "-v", "v_l6.npy"], [3], ["(2, 6, 5)", "(2, 4, 4)"]),
        ("sdpa_length_mismatch", ["sdpa", "-q", "q_e4.npy", "-k", "q_e4.npy", "-v", "v_l6.npy"], [3], ["(2, 6, 3)", "(2, 4, 4)"]),
        ("bias_k_without_bias_v", base + ["--heads", "2", "--params", "params_bias_k_only.safetensors"], [3], ["bias_k without bias_v"]),
        ("bias_k_wrong_shape", base + ["--heads", "2", "--params", "params_bias_k_1x1x6.safetensors"], [3], ["bias_k", "(1, 1, 6)", "(1, 1, 8)"]),
        ("zero_attn_with_valid_lens", base + ["--heads", "2", "--params", "params.safetensors", "--valid-lens", "3,2", "--add-zero-attn"], [2], ["add_zero_attn", "valid lengths"]),
        ("zero_attn_with_rotary", base + ["--heads", "2", "--params", "params.safetensors", "--rotary", "half", "--add-zero-attn"], [2], ["add_zero_attn", "positions"]),
        ("add_bias_kv_with_params", base + ["--heads", "2", "--params", "params.safetensors", "--add-bias-kv"], [2, 3], ["--add-bias-kv"]),
        ("missing_input_file", base + ["--heads", "2", "--params", "no_such_params.safetensors"], [3], ["no_such_params.safetensors"]),
    ]
    out = [{"name": n, "args": a, "exit": codes, "stderr": texts, "append_output": True}
           for n, a, codes, texts in entries]
    out.append({"name": "cannot_write_output",
                "args": base + ["--heads", "2", "--params", "params.safetensors", "-o", "no_such_dir/out.npy"],
                "exit": [4], "stderr": ["no_such_dir/out.npy"], "append_output": False})
    with open(ROOT / "bad_cases.json", "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


def write_cases(root, case_list):
    """ROOT/cases.json; the e2e script splits the args on spaces, so none may hold one."""
    for c in case_list:
        assert all(" " not in a and "|" not in a for a in c["args"]), c
    with open(root / "cases.json", "w") as fh:
        json.dump(case_list, fh, indent=1)
        fh.write("\n")
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    print(f"{len(case_list)} cases in {root} ({total} bytes)")


def main():
    global ROOT
    if len(sys.argv) > 1:  # another folder: to regenerate into and compare with the committed one
        ROOT = Path(sys.argv[1]).resolve()
    if ROOT.exists():
        shutil.rmtree(ROOT)
    ROOT.mkdir(parents=True)

    mha_case("self_bias", e=8, h=2)
    mha_case("flags_threads_trace", e=8, h=2, extra_args=["--threads", "2", "--trace", "none"])
    mha_case("cross_lq3_lk5", e=8, h=2, lq=3, lk=5, cross=True)
    mha_case("kdim5_vdim3", e=6, h=2, lq=4, lk=5, kdim=5, vdim=3)
    mha_case("no_bias", e=8, h=2, bias=False)
    mha_case("causal", e=8, h=2, lq=5, causal=True)
    mha_case("causal_cross_lq4_lk6", e=8, h=2, lq=4, lk=6, cross=True, causal=True)
    mha_case("causal_cross_lq6_lk4", e=8, h=2, lq=6, lk=4, cross=True, causal=True)
    mha_case("key_padding_bool", e=8, h=2, key_padding_mask=kpm_some)
    mha_case("key_padding_uint8", e=8, h=2, key_padding_mask=lambda r, b, lk: kpm_some(r, b, lk).astype(np.uint8))
    mha_case("attn_mask_bool_2d", e=8, h=2, lq=4, lk=6, cross=True,
             attn_mask=lambda r, b, h, lq, lk: bool_mask_no_empty_row(r, (lq, lk)))
    mha_case("attn_mask_bool_4d", e=8, h=2, lq=4, lk=6, cross=True,
             attn_mask=lambda r, b, h, lq, lk: bool_mask_no_empty_row(r, (b, h, lq, lk)))
    mha_case("attn_mask_float_2d", e=8, h=2, attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)))
    mha_case("attn_mask_float_b1", e=8, h=2, attn_mask=lambda r, b, h, lq, lk: r.standard_normal((b, 1, lq, lk)))
    mha_case("masks_combined", e=8, h=2, causal=True, key_padding_mask=lambda r, b, lk: np.array([[0, 1, 0, 0, 1], [0, 0, 1, 0, 0]], bool),
             attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)))
    # Key 0 of batch 1 padded + causal: query 0 of batch 1 has no allowed key.
    mha_case("empty_row_padding_causal", e=8, h=2, causal=True, expect_empty=True,
             key_padding_mask=lambda r, b, lk: np.array([[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]], bool))
    # Every key of batch 1 padded: its whole output is b_o.
    mha_case("empty_rows_all_keys_padded", e=8, h=2, lq=3, lk=4, cross=True, expect_empty=True,
             key_padding_mask=lambda r, b, lk: np.array([[0, 0, 1, 0], [1, 1, 1, 1]], bool))
    mha_case("empty_row_bool_mask", e=8, h=2, lq=4, lk=5, cross=True, expect_empty=True,
             attn_mask=lambda r, b, h, lq, lk: np.array([[0, 1, 0, 0, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 1, 0, 1, 1]], bool))
    mha_case("heads_1", e=8, h=1)
    mha_case("heads_4", e=8, h=4, lq=6)
    mha_case("heads_4_e12", e=12, h=4, lq=7, lk=3, cross=True)
    mha_case("unbatched_2d", e=8, h=2, lq=5, unbatched=True)
    mha_case("unbatched_2d_cross_causal", e=6, h=3, lq=4, lk=6, unbatched=True, cross=True, causal=True)
    mha_case("f64_self", e=8, h=2, dtype="f64")
    mha_case("f64_cross_masked", e=6, h=3, lq=3, lk=5, kdim=4, vdim=7, dtype="f64",
             key_padding_mask=kpm_some, attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)))
    mha_case("scale_custom", e=8, h=2, scale=0.2)
    mha_case("prefix", e=8, h=2, prefix="encoder.layers.0.self_attn.")
    mha_case("d2l_names_bias", e=8, h=2, lq=3, lk=4, cross=True, params_format="d2l")
    mha_case("params_json", e=8, h=2, params_format="json")
    mha_case("params_npy_dir", e=6, h=2, lq=3, lk=4, kdim=5, vdim=3, params_format="npydir")

    sdpa_case("sdpa_basic")
    sdpa_case("sdpa_bool_mask", scale=0.3, attn_mask=lambda r, lead, lq, lk: bool_mask_no_empty_row(r, (lq, lk)))
    sdpa_case("sdpa_bool_mask_full", attn_mask=lambda r, lead, lq, lk: bool_mask_no_empty_row(r, lead + (lq, lk)))
    sdpa_case("sdpa_float_mask_broadcast", attn_mask=lambda r, lead, lq, lk: r.standard_normal((lead[0], 1, lq, lk)))
    sdpa_case("sdpa_causal", lq=5, lk=5, e=4, ev=4, causal=True)
    sdpa_case("sdpa_causal_lq4_lk6", causal=True)
    sdpa_case("sdpa_causal_lq6_lk3", lq=6, lk=3, causal=True)
    sdpa_case("sdpa_empty_row", expect_empty=True,
              attn_mask=lambda r, lead, lq, lk: np.array([[0, 0, 1, 1, 0, 0], [1] * 6, [0] * 6, [1, 1, 1, 1, 1, 0]], bool))
    sdpa_case("sdpa_3d", lead=(2,), lq=3, lk=5)
    sdpa_case("sdpa_2d", lead=(), lq=5, lk=4, e=6, ev=2)
    sdpa_case("sdpa_f64", dtype="f64", attn_mask=lambda r, lead, lq, lk: r.standard_normal((lq, lk)))
    sdpa_case("sdpa_f64_causal_4lead", lead=(2, 1, 2), lq=3, lk=4, dtype="f64", causal=True)

    # add_bias_kv / add_zero_attn (after the sdpa cases: the older cases keep their seeds)
    kv = dict(add_bias_kv=True)
    kvz = dict(add_bias_kv=True, add_zero_attn=True)
    mha_case("bias_kv_self", e=8, h=2, **kv)
    mha_case("zero_attn_self", e=8, h=2, add_zero_attn=True)
    mha_case("bias_kv_zero_attn_cross", e=8, h=2, lq=3, lk=5, cross=True, **kvz)
    mha_case("bias_kv_kdim_vdim_masks", e=6, h=3, lq=4, lk=5, kdim=5, vdim=3, key_padding_mask=kpm_some,
             attn_mask=lambda r, b, h, lq, lk: bool_mask_no_empty_row(r, (lq, lk)), **kv)
    mha_case("zero_attn_masks_4d", e=8, h=2, lq=4, lk=6, cross=True, add_zero_attn=True, key_padding_mask=kpm_some,
             attn_mask=lambda r, b, h, lq, lk: r.standard_normal((b, h, lq, lk)))
    mha_case("bias_kv_zero_attn_masks_f64", e=8, h=4, dtype="f64", key_padding_mask=kpm_some,
             attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)), **kvz)
    # Every key of batch 1 padded: the appended keys still attend (no empty row, unlike PyTorch without them).
    mha_case("bias_kv_all_keys_padded", e=8, h=2, lq=3, lk=4, cross=True,
             key_padding_mask=lambda r, b, lk: np.array([[0, 0, 1, 0], [1, 1, 1, 1]], bool), **kv)
    mha_case("bias_kv_unbatched", e=6, h=3, lq=4, lk=6, unbatched=True, cross=True, **kvz)
    mha_case("bias_kv_no_weights", e=8, h=2, lq=4, lk=6, cross=True, key_padding_mask=kpm_some,
             need_weights=False, **kvz)
    mha_case("zero_attn_no_weights_self", e=8, h=2, attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)),
             need_weights=False, add_zero_attn=True)
    mha_case("bias_kv_zero_attn_prefix", e=8, h=2, prefix="encoder.layers.0.self_attn.", **kvz)
    # --causal with the appended keys: PyTorch takes the equivalent bool mask and pads it with an
    # allowed column per appended key, so every query sees them (after the cases above: their seeds
    # stay).
    mha_case("bias_kv_causal", e=8, h=2, causal=True, **kv)
    mha_case("bias_kv_zero_attn_causal_masks_f64", e=8, h=4, dtype="f64", causal=True, key_padding_mask=kpm_some,
             attn_mask=lambda r, b, h, lq, lk: r.standard_normal((lq, lk)), **kvz)
    mha_case("zero_attn_causal_cross_bool_4d", e=6, h=3, lq=4, lk=6, cross=True, causal=True, add_zero_attn=True,
             attn_mask=lambda r, b, h, lq, lk: bool_mask_no_empty_row(r, (b, 1, lq, lk)))
    mha_case("bias_kv_causal_no_weights", e=8, h=2, lq=6, causal=True, need_weights=False, **kvz)

    make_bad_cases()
    write_cases(ROOT, cases)


if __name__ == "__main__":
    main()
