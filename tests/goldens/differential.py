#!/usr/bin/python3
"""Differential test: `attntrace mha` against PyTorch 1.13 on FRESH random configurations.

Run by tests/e2e/mha_differential.sh; by hand:
  /usr/bin/python3 tests/goldens/differential.py --attntrace build/attntrace [--seed N] [--configs 25]
The seed comes from the clock unless given (--seed or DIFF_SEED=N) and is printed first, so a
failure is reproduced with DIFF_SEED=<seed>.

Each configuration draws: batch 1..3 or an unbatched 2-D input, Lq/Lk 1..9, H 1..4 and E a multiple
of H, self- or cross-attention with kdim/vdim sometimes != E, bias on/off, f32/f64, masks (causal,
key padding, bool or float attention mask of a broadcastable shape, d2l valid_lens 1-D/2-D, any
combination, fully masked rows included), a custom --scale, the params file's naming scheme
(PyTorch, d2l, Bloem), format (.safetensors, .json, a directory of .npy) and a --prefix, per-head or
--average-heads weights, and --threads. Expected values are PyTorch's nn.MultiheadAttention, except
the rows PyTorch 1.13 leaves NaN (a query with no allowed key), which the contract defines as zero
weights and a zero context; those come from the numpy reference (reference.py), which is checked
against PyTorch on every other row.

Then the random init: `--seed 7 --save-params p.safetensors` must be repeatable, load into PyTorch
under its own names and give the same output there, and follow the documented init.
Tolerances: f32 rtol 1e-4 atol 1e-5; f64 rtol 1e-10 atol 1e-10.
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import st  # noqa: E402

TOL = {"f32": dict(rtol=1e-4, atol=1e-5), "f64": dict(rtol=1e-10, atol=1e-10)}
NP_DTYPE = {"f32": np.float32, "f64": np.float64}


class Failure(Exception):
    pass


def check_close(what, actual, expected, dtype):
    if actual.shape != expected.shape:
        raise Failure(f"{what}: shape {actual.shape} but expected {expected.shape}")
    if not np.isfinite(actual).all():
        raise Failure(f"{what}: contains NaN/inf at {np.argwhere(~np.isfinite(actual))[:3].tolist()}")
    if not np.allclose(actual, expected, **TOL[dtype]):
        d = np.abs(actual.astype(np.float64) - expected)
        where = np.unravel_index(np.argmax(d - TOL[dtype]["rtol"] * np.abs(expected)), d.shape)
        raise Failure(f"{what}: max |diff| {d.max():.3g}; at {tuple(int(i) for i in where)}: "
                      f"got {actual[where]!r}, expected {expected[where]!r}")


def run(attntrace, args, cwd):
    proc = subprocess.run([attntrace] + args, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise Failure(f"exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def draw(rng):
    c = {}
    c["dtype"] = "f64" if rng.random() < 0.3 else "f32"
    c["heads"] = int(rng.integers(1, 5))
    c["head_dim"] = int(rng.integers(1, 5))
    c["embed"] = c["heads"] * c["head_dim"]
    c["unbatched"] = bool(rng.random() < 0.2)
    c["batch"] = 1 if c["unbatched"] else int(rng.integers(1, 4))
    c["lq"] = int(rng.integers(1, 10))
    c["self"] = bool(rng.random() < 0.4)
    c["lk"] = c["lq"] if c["self"] else int(rng.integers(1, 10))
    other_dims = not c["self"] and rng.random() < 0.4
    c["kdim"] = int(rng.integers(1, 10)) if other_dims else c["embed"]
    c["vdim"] = int(rng.integers(1, 10)) if other_dims else c["embed"]
    c["value_is_key"] = bool(not c["self"] and c["kdim"] == c["vdim"] and rng.random() < 0.3)
    c["bias"] = bool(rng.random() < 0.5)
    c["causal"] = bool(rng.random() < 0.3)
    c["key_padding"] = bool(not c["unbatched"] and rng.random() < 0.3)
    c["attn_mask"] = str(rng.choice(["none", "none", "bool", "float"]))
    shapes = [("lq", "lk")] if c["unbatched"] else [("lq", "lk"), ("b", "h", "lq", "lk"), ("b", "1", "lq", "lk"), ("1", "h", "lq", "lk")]
    c["mask_shape"] = list(shapes[int(rng.integers(len(shapes)))])
    c["valid_lens"] = "none" if c["unbatched"] or rng.random() < 0.8 else str(rng.choice(["1d", "1d-file", "2d"]))
    c["scale"] = float(np.round(rng.uniform(0.05, 1.5), 4)) if rng.random() < 0.2 else None
    c["scheme"] = str(rng.choice(["torch", "torch", "torch", "d2l", "bloem"]))
    if c["scheme"] == "bloem" and c["bias"]:
        c["scheme"] = "d2l"
    c["format"] = str(rng.choice(["safetensors"] * 6 + ["json", "npydir"]))
    c["prefix"] = "model.layers.3.attn." if rng.random() < 0.2 else None
    c["average_heads"] = bool(rng.random() < 0.3)
    c["threads"] = int(rng.integers(1, 3))
    return c


def torch_mask_and_allowed(c, rng, args, workdir):
    """Writes the mask files; returns (torch attn_mask or None, torch key_padding_mask or None,
    reference kwargs)."""
    b, h, lq, lk = c["batch"], c["heads"], c["lq"], c["lk"]
    dims = {"b": b, "h": h, "lq": lq, "lk": lk, "1": 1}
    npdt = NP_DTYPE[c["dtype"]]
    ref = {}
    # Everything that is not key padding goes to PyTorch as one float (B*H, Lq, Lk) mask.
    additive = np.zeros((b, h, lq, lk))
    any_mask = False
    if c["attn_mask"] != "none":
        shape = tuple(dims[d] for d in c["mask_shape"])
        if c["attn_mask"] == "bool":
            m = rng.random(shape) < 0.3
        else:
            m = rng.standard_normal(shape).astype(npdt)
        np.save(workdir / "attn_mask.npy", m)
        args += ["--attn-mask", "attn_mask.npy"]
        ref["attn_mask"] = m
        additive = additive + (np.where(m, -np.inf, 0.0) if m.dtype == np.bool_ else m.astype(np.float64))
        any_mask = True
    if c["causal"]:
        args += ["--causal"]
        ref["causal"] = True
        additive = additive + np.where(np.triu(np.ones((lq, lk), bool), 1), -np.inf, 0.0)
        any_mask = True
    if c["valid_lens"] != "none":
        if c["valid_lens"] == "2d":
            vl = rng.integers(0, lk + 1, size=(b, lq))
            np.save(workdir / "valid_lens.npy", vl.astype(np.int64))
            args += ["--valid-lens", "valid_lens.npy"]
            bad = np.arange(lk)[None, None, :] >= vl[:, :, None]          # (B, Lq, Lk)
            additive = additive + np.where(bad[:, None], -np.inf, 0.0)
        else:
            vl = rng.integers(1 if rng.random() < 0.8 else 0, lk + 1, size=(b,))
            if c["valid_lens"] == "1d-file":
                np.save(workdir / "valid_lens.npy", vl.astype(np.int64))
                args += ["--valid-lens", "valid_lens.npy"]
            else:
                args += ["--valid-lens", ",".join(str(int(v)) for v in vl)]
            bad = np.arange(lk)[None, :] >= vl[:, None]                    # (B, Lk)
            additive = additive + np.where(bad[:, None, None, :], -np.inf, 0.0)
        ref["valid_lens"] = vl
        any_mask = True
    torch_attn = None
    if any_mask:
        t = torch.from_numpy(additive)
        torch_attn = t[0] if c["unbatched"] else t.reshape(b * h, lq, lk)
    torch_kpm = None
    if c["key_padding"]:
        kpm = rng.random((b, lk)) < 0.3
        np.save(workdir / "key_padding_mask.npy", kpm)
        args += ["--key-padding-mask", "key_padding_mask.npy"]
        ref["key_padding_mask"] = kpm
        torch_kpm = torch.from_numpy(kpm)
    return torch_attn, torch_kpm, ref


def params_files(c, state, args, workdir):
    """Writes the params under the configuration's scheme and format."""
    w = reference.torch_state_to_weights(state)
    if c["scheme"] == "torch":
        tensors = dict(state)
    elif c["scheme"] == "d2l":
        tensors = {"W_q.weight": w["w_q"], "W_k.weight": w["w_k"], "W_v.weight": w["w_v"], "W_o.weight": w["w_o"]}
        for s in "qkvo":
            if w.get(f"b_{s}") is not None:
                tensors[f"W_{s}.bias"] = w[f"b_{s}"]
    else:  # Bloem's names: no q/k/v bias; unifyheads.bias is optional
        tensors = {"toqueries.weight": w["w_q"], "tokeys.weight": w["w_k"], "tovalues.weight": w["w_v"],
                   "unifyheads.weight": w["w_o"]}
    if c["prefix"]:
        tensors = {c["prefix"] + k: v for k, v in tensors.items()}
        tensors["model.layers.2.attn.in_proj_weight"] = np.ones((3, 3), dtype=np.float32)
    if c["format"] == "json":
        with open(workdir / "params.json", "w") as f:
            json.dump({k: v.tolist() for k, v in tensors.items()}, f)
        args += ["--params", "params.json"]
    elif c["format"] == "npydir":
        (workdir / "params").mkdir()
        for k, v in tensors.items():
            np.save(workdir / "params" / (k + ".npy"), v)
        args += ["--params", "params"]
    else:
        st.write(workdir / "params.safetensors", tensors)
        args += ["--params", "params.safetensors"]
    if c["prefix"]:
        args += ["--prefix", c["prefix"]]


def run_config(attntrace, c, rng, workdir):
    workdir.mkdir(parents=True)
    npdt, tdt = NP_DTYPE[c["dtype"]], (torch.float64 if c["dtype"] == "f64" else torch.float32)
    e, h, b, lq, lk = c["embed"], c["heads"], c["batch"], c["lq"], c["lk"]
    kd = None if c["kdim"] == e else c["kdim"]
    vd = None if c["vdim"] == e else c["vdim"]
    m = nn.MultiheadAttention(e, h, bias=c["bias"], kdim=kd, vdim=vd, batch_first=True).to(tdt)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
    lead = () if c["unbatched"] else (b,)
    query = rng.standard_normal(lead + (lq, e)).astype(npdt)
    np.save(workdir / "query.npy", query)
    args = ["mha", "-q", "query.npy"]
    if c["self"]:
        key = value = query
    else:
        key = rng.standard_normal(lead + (lk, c["kdim"])).astype(npdt)
        np.save(workdir / "key.npy", key)
        args += ["-k", "key.npy"]
        if c["value_is_key"]:
            value = key
        else:
            value = rng.standard_normal(lead + (lk, c["vdim"])).astype(npdt)
            np.save(workdir / "value.npy", value)
            args += ["-v", "value.npy"]
    args += ["--heads", str(h)]
    state = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
    params_files(c, state, args, workdir)
    torch_attn, torch_kpm, ref_masks = torch_mask_and_allowed(c, rng, args, workdir)
    if c["scale"] is not None:
        args += ["--scale", repr(c["scale"])]
    args += ["--dtype", c["dtype"], "--threads", str(c["threads"]), "-o", "out.npy", "--attn-weights", "w.npy"]
    if c["average_heads"]:
        args += ["--average-heads"]

    # PyTorch (custom scale: W_q, b_q scaled by scale*sqrt(P), same scores).
    if c["scale"] is not None:
        factor = c["scale"] * math.sqrt(c["head_dim"])
        with torch.no_grad():
            (m.in_proj_weight if m._qkv_same_embed_dim else m.q_proj_weight)[:e] *= factor
            if c["bias"]:
                m.in_proj_bias[:e] *= factor
    m.train()  # dropout is 0; keeps PyTorch off its fast path
    tq, tk, tv = (torch.from_numpy(x) for x in (query, key, value))
    out, w = m(tq, tk, tv, key_padding_mask=torch_kpm, attn_mask=torch_attn.to(tdt) if torch_attn is not None else None,
               need_weights=True, average_attn_weights=False)
    out, w = out.detach().numpy().astype(np.float64), w.detach().numpy().astype(np.float64)
    ref_out, ref_w = reference.mha(query, key, value, **reference.torch_state_to_weights(state), heads=h,
                                   scale=c["scale"], **ref_masks)
    for name, t, r in (("output", out, ref_out), ("weights", w, ref_w)):
        finite = ~np.isnan(t)
        if not np.allclose(t[finite], r[finite], rtol=1e-4, atol=1e-5):
            raise Failure(f"harness: PyTorch and the numpy reference disagree on {name} "
                          f"(max {np.abs(t[finite] - r[finite]).max():.3g})")
        t[~finite] = r[~finite]
    empty_rows = int((ref_w.sum(axis=-1) == 0).sum())

    cmd = "attntrace " + " ".join(shlex.quote(a) for a in args)
    try:
        run(attntrace, args, workdir)
        got_out = np.load(workdir / "out.npy")
        got_w = np.load(workdir / "w.npy")
        check_close("output", got_out, out, c["dtype"])
        check_close("averaged weights" if c["average_heads"] else "per-head weights", got_w,
                    w.mean(axis=-3) if c["average_heads"] else w, c["dtype"])
        if got_out.dtype != npdt:
            raise Failure(f"output dtype {got_out.dtype}, expected {np.dtype(npdt)} for --dtype {c['dtype']}")
    except Failure as f:
        raise Failure(f"{f}\n    command (in the config's workdir): {cmd}") from None
    return empty_rows


def xavier_bound(w):
    return math.sqrt(6.0 / (w.shape[0] + w.shape[1]))


def check_random_init(attntrace, workdir, rng):
    """--seed N --save-params: repeatable, loads into PyTorch, follows the documented init."""
    checks = 0
    # (label, B, L, E, H, kdim, vdim, bias flag, dtype)
    for label, b, lq, lk, e, h, kdim, vdim, bias, dtype in (
            ("self, --bias", 2, 5, 5, 8, 2, None, None, True, "f32"),
            ("cross kdim/vdim, --no-bias", 2, 3, 6, 6, 3, 5, 4, False, "f64"),
            ("unbatched, --bias", None, 4, 4, 4, 1, None, None, True, "f32"),
            ("self, --bias --add-bias-kv --add-zero-attn", 2, 5, 5, 8, 2, None, None, True, "f64")):
        kv = "--add-bias-kv" in label  # PyTorch's add_bias_kv / add_zero_attn: bias_k, bias_v saved too
        d = workdir / f"seed_{checks}"
        d.mkdir(parents=True)
        npdt = NP_DTYPE[dtype]
        lead = () if b is None else (b,)
        query = rng.standard_normal(lead + (lq, e)).astype(npdt)
        np.save(d / "x.npy", query)
        args = ["mha", "-q", "x.npy"]
        key = value = query
        if kdim:
            key = rng.standard_normal(lead + (lk, kdim)).astype(npdt)
            value = rng.standard_normal(lead + (lk, vdim)).astype(npdt)
            np.save(d / "k.npy", key)
            np.save(d / "v.npy", value)
            args += ["-k", "k.npy", "-v", "v.npy"]
        args += ["--heads", str(h), "--dtype", dtype]
        init = ["--seed", "7", "--bias" if bias else "--no-bias"] + (["--add-bias-kv"] if kv else [])
        if kv:
            args += ["--add-zero-attn"]
        try:
            run(attntrace, args + init + ["--save-params", "p.safetensors", "-o", "out.npy", "--attn-weights", "w.npy"], d)
            run(attntrace, args + init + ["--save-params", "p2.safetensors", "-o", "out2.npy", "--attn-weights", "w2.npy"], d)
            for x, y in (("out.npy", "out2.npy"), ("w.npy", "w2.npy"), ("p.safetensors", "p2.safetensors")):
                if (d / x).read_bytes() != (d / y).read_bytes():
                    raise Failure(f"--seed 7 twice gave different {x}")
            p = st.read(d / "p.safetensors")
            want = {"q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight"}
            if bias:
                want |= {"in_proj_bias", "out_proj.bias"}
            if kv:
                want |= {"bias_k", "bias_v"}
            if set(p) != want:
                raise Failure(f"--save-params names {sorted(p)}, expected {sorted(want)}")
            expect_shapes = {"q_proj_weight": (e, e), "k_proj_weight": (e, kdim or e), "v_proj_weight": (e, vdim or e),
                             "out_proj.weight": (e, e), "in_proj_bias": (3 * e,), "out_proj.bias": (e,),
                             "bias_k": (1, 1, e), "bias_v": (1, 1, e)}
            for k, v in p.items():
                if v.shape != expect_shapes[k]:
                    raise Failure(f"--save-params {k}: shape {v.shape}, expected {expect_shapes[k]}")
            for k in ("q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight"):
                a = xavier_bound(p[k])
                if np.abs(p[k]).max() > a * (1 + 1e-6) or np.abs(p[k]).max() < 0.5 * a:
                    raise Failure(f"--seed init {k}: max |w| {np.abs(p[k]).max():.4g}, xavier bound {a:.4g}")
            for k in ("in_proj_bias", "out_proj.bias"):
                if k in p and np.any(p[k] != 0):
                    raise Failure(f"--seed init {k} is not zero")
            if kv and (np.array_equal(p["bias_k"], p["bias_v"]) or not np.all(np.abs(p["bias_k"]) < 6 / math.sqrt(e))):
                raise Failure("--add-bias-kv: bias_k equals bias_v, or is far outside N(0, 1/E)")
            if np.array_equal(p["q_proj_weight"], p["k_proj_weight"]):
                raise Failure("--seed init: q_proj_weight == k_proj_weight")
            # PyTorch, with the saved parameters.
            m = nn.MultiheadAttention(e, h, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, add_bias_kv=kv,
                                      add_zero_attn=kv).double()
            sd = {k: torch.from_numpy(v.astype(np.float64)) for k, v in p.items()}
            if m._qkv_same_embed_dim:
                sd["in_proj_weight"] = torch.cat([sd.pop("q_proj_weight"), sd.pop("k_proj_weight"), sd.pop("v_proj_weight")])
            m.load_state_dict(sd)
            m.train()
            to = lambda x: torch.from_numpy(x.astype(np.float64))  # noqa: E731
            t_out, t_w = m(to(query), to(key), to(value), average_attn_weights=False)
            check_close("--seed 7 output vs PyTorch with p.safetensors", np.load(d / "out.npy"), t_out.detach().numpy(), dtype)
            check_close("--seed 7 weights vs PyTorch with p.safetensors", np.load(d / "w.npy"), t_w.detach().numpy(), dtype)
            # And the saved params give the same run through --params.
            run(attntrace, args + ["--params", "p.safetensors", "-o", "out3.npy"], d)
            check_close("--params p.safetensors vs the --seed 7 run", np.load(d / "out3.npy"), np.load(d / "out.npy").astype(np.float64), dtype)
            # Another seed, other params.
            run(attntrace, args + ["--seed", "8", init[2], "-o", "out8.npy"], d)
            if np.allclose(np.load(d / "out8.npy"), np.load(d / "out.npy")):
                raise Failure("--seed 8 gave the same output as --seed 7")
        except Failure as f:
            raise Failure(f"random init ({label}): {f}") from None
        checks += 1

    # --head-dim / --value-head-dim / --out-dim: PyTorch's module cannot express these; the numpy
    # reference with the saved parameters must agree.
    d = workdir / "seed_sizes"
    d.mkdir()
    x = rng.standard_normal((2, 4, 6)).astype(np.float64)
    np.save(d / "x.npy", x)
    try:
        run(attntrace, ["mha", "-q", "x.npy", "--heads", "2", "--seed", "3", "--head-dim", "5", "--value-head-dim", "2",
                        "--out-dim", "7", "--bias", "--dtype", "f64", "--save-params", "p.safetensors",
                        "-o", "out.npy", "--attn-weights", "w.npy"], d)
        p = st.read(d / "p.safetensors")
        shapes = {k: v.shape for k, v in p.items()}
        want = {"q_proj_weight": (10, 6), "k_proj_weight": (10, 6), "v_proj_weight": (4, 6), "out_proj.weight": (7, 4),
                "in_proj_bias": (24,), "out_proj.bias": (7,)}
        if shapes != want:
            raise Failure(f"saved shapes {shapes}, expected {want}")
        bq, bk, bv = np.split(p["in_proj_bias"].astype(np.float64), [10, 20])
        r_out, r_w = reference.mha(x, w_q=p["q_proj_weight"], w_k=p["k_proj_weight"], w_v=p["v_proj_weight"],
                                   b_q=bq, b_k=bk, b_v=bv, w_o=p["out_proj.weight"], b_o=p["out_proj.bias"], heads=2)
        check_close("output", np.load(d / "out.npy"), r_out, "f64")
        check_close("weights", np.load(d / "w.npy"), r_w, "f64")
    except Failure as f:
        raise Failure(f"random init (--head-dim 5 --value-head-dim 2 --out-dim 7): {f}") from None
    return checks + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attntrace", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--configs", type=int, default=25)
    opts = ap.parse_args()
    seed = opts.seed
    if seed is None and os.environ.get("DIFF_SEED"):
        seed = int(os.environ["DIFF_SEED"])
    if seed is None:
        seed = time.time_ns() % (2**31)
    print(f"differential: seed {seed} (reproduce with DIFF_SEED={seed})", flush=True)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    attntrace = os.path.abspath(opts.attntrace)
    workdir = Path(opts.workdir)

    failures = 0
    empty = 0
    for i in range(opts.configs):
        c = draw(rng)
        try:
            empty += run_config(attntrace, c, rng, workdir / f"config_{i:02d}")
        except Failure as f:
            failures += 1
            print(f"FAIL config {i}: {json.dumps(c)}\n    {f}", flush=True)
    # one query of 1 MiB or more on two threads: the run has a helper make the pages of its blocks
    # while it reads (PagesAhead, lib/include/attntrace/tensor/buffer.hpp), and its projections,
    # weights and output come from that region
    c = draw(rng)
    c.update(dtype="f32", heads=4, head_dim=64, embed=256, unbatched=False, batch=1, lq=1100, lk=1100, self=True,
             kdim=256, vdim=256, value_is_key=False, causal=False, key_padding=False, attn_mask="none",
             valid_lens="none", scale=None, scheme="torch", format="safetensors", prefix=None, threads=2)
    try:
        run_config(attntrace, c, rng, workdir / "config_large")
    except Failure as f:
        failures += 1
        print(f"FAIL large config: {json.dumps(c)}\n    {f}", flush=True)
    try:
        n = check_random_init(attntrace, workdir, rng)
        print(f"random init: {n} checks ok")
    except Failure as f:
        failures += 1
        print(f"FAIL {f}", flush=True)
    print(f"differential: {opts.configs} configs and a large one ({empty} fully masked query rows), {failures} failures; "
          f"seed {seed}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
