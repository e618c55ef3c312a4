#!/usr/bin/env bash
# NaN and Inf against PyTorch 1.13 on both paths (tiled, and weights kept with --attn-weights):
# - a NaN among a row's allowed scores (a NaN in q, --scale nan) makes that row's weights and output
#   NaN, as torch's softmax does, and the row is not counted as empty (issue 16, item 9);
# - a row whose keys are all masked is empty: zero weights and a zero output, even when V holds NaN
#   or Inf in other rows (no 0 * NaN through the context product; issue 16, item 10). PyTorch gives
#   NaN there; zeros are attntrace's documented contract.
# - Inf or NaN in V at a key a causal row cannot see still makes that column NaN (0 * Inf), on
#   both kernels of the tiled path.
# Every other value must equal PyTorch's (f32: rtol 1e-4, atol 1e-5), NaN where PyTorch has NaN.
source "$(dirname "$0")/cli_common.bash"
"$PYTHON" -c 'import numpy, torch' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy/torch"; exit 77; }

"$PYTHON" - "$A" "$W" "$SRC/tests/goldens" <<'PY'
import json, re, subprocess, sys
import numpy as np, torch
exe, work, goldens = sys.argv[1:4]
sys.path.insert(0, goldens)
import st

failures = []
def save(name, a):
    path = f"{work}/{name}"
    np.save(path, np.ascontiguousarray(a))
    return path

def attntrace(args, weights):
    """Output, weights (or None) and the trace header's count of empty rows. The text trace without
    values keeps no (Lq, Lk) stage, so without --attn-weights the run takes the tiled path."""
    out = f"{work}/out.npy"
    extra = ["--attn-weights", f"{work}/w.npy"] if weights else []
    p = subprocess.run([exe] + args + ["-o", out] + extra, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: exit {p.returncode}: {' '.join(args)}\n{p.stderr}")
    empty = re.search(r"(\d+) empty rows", p.stdout.splitlines()[0])
    return np.load(out), (np.load(f"{work}/w.npy") if weights else None), int(empty.group(1))

def check(case, got, want, what):
    if got.shape != want.shape:
        failures.append(f"{case}: {what} shape {got.shape}, expected {want.shape}"); return
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    if not np.array_equal(nan_got, nan_want):
        idx = np.argwhere(nan_got != nan_want)[0]
        failures.append(f"{case}: {what} NaN at {tuple(idx)}: got {got[tuple(idx)]}, expected {want[tuple(idx)]}"); return
    ok = ~nan_want
    if not np.allclose(got[ok], want[ok], rtol=1e-4, atol=1e-5):
        d = np.abs(got - want); d[~ok] = 0
        idx = np.unravel_index(np.argmax(d), d.shape)
        failures.append(f"{case}: {what} max |diff| {d[idx]:.3g} at {idx}")

def run_case(case, args, want_out, want_w, want_empty):
    for kept in (False, True):
        out, w, empty = attntrace(args, kept)
        path = "weights kept" if kept else "tiled"
        check(f"{case} ({path})", out, want_out, "output")
        if kept: check(f"{case} ({path})", w, want_w, "weights")
        if empty != want_empty:
            failures.append(f"{case} ({path}): empty_rows {empty}, expected {want_empty}")
    # the head statistics count the same empty rows: a NaN row is not one
    p = subprocess.run([exe] + args + ["-o", f"{work}/out.npy", "--format", "json"], capture_output=True, text=True)
    doc = json.loads(p.stdout)
    per_head = sum(h["empty_rows"] for h in doc["head_stats"])
    if (doc["empty_rows"], per_head) != (want_empty, want_empty):
        failures.append(f"{case} (json): empty_rows {doc['empty_rows']}, head_stats {per_head}, expected {want_empty}")

def torch_sdpa(q, k, v, scale, allowed=None):
    s = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) * scale
    if allowed is not None: s = s.masked_fill(~torch.from_numpy(allowed), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return (w @ torch.from_numpy(v)).numpy(), w.numpy()

def zero_empty(out, w, allowed):
    """attntrace's contract: a row whose keys are all masked has zero weights and a zero output."""
    empty = ~allowed.any(-1)
    out, w = out.copy(), w.copy()
    out[np.broadcast_to(empty, out.shape[:-1])] = 0
    w[np.broadcast_to(empty, w.shape[:-1])] = 0
    return out, w

rng = np.random.default_rng(16)
q = rng.standard_normal((2, 5, 8)).astype(np.float32)
k = rng.standard_normal((2, 6, 8)).astype(np.float32)
v = rng.standard_normal((2, 6, 4)).astype(np.float32)
scale = 1 / np.sqrt(8)

# 1. A NaN in one query row: that row is NaN (it was zeros and counted as empty).
qn = q.copy(); qn[0, 1, :] = np.nan; qn[1, 3, 2] = np.nan
o, w = torch_sdpa(qn, k, v, scale)
run_case("sdpa NaN query rows", ["sdpa", "-q", save("qn.npy", qn), "-k", save("k.npy", k), "-v", save("v.npy", v)],
         o, w, 0)

# 2. --scale nan with a causal mask: every row NaN, none empty.
causal = np.tril(np.ones((5, 6), dtype=bool))
o, w = torch_sdpa(q, k, v, float("nan"), causal)
run_case("sdpa --scale nan --causal", ["sdpa", "-q", save("q.npy", q), "-k", f"{work}/k.npy", "-v", f"{work}/v.npy",
         "--scale", "nan", "--causal"], o, w, 0)

# 3. A fully masked row while V holds NaN and Inf in keys every other row masks: the empty row is
#    zeros on both paths; the NaN row stays NaN; the rest equals PyTorch.
allowed = np.ones((2, 5, 6), dtype=bool)
allowed[:, :, 4:] = False       # keys 4 and 5 (NaN / Inf in V) masked everywhere...
allowed[0, 2, :] = False        # ...and query 2 of batch 0 sees no key at all
vn = v.copy(); vn[:, 4, 0] = np.nan; vn[:, 5, 1] = np.inf
qn = q.copy(); qn[1, 0, :] = np.nan
o, w = torch_sdpa(qn, k, vn, scale, allowed)
o, w = zero_empty(o, w, allowed)
run_case("sdpa empty row with NaN/Inf in V", ["sdpa", "-q", save("qn3.npy", qn), "-k", f"{work}/k.npy", "-v",
         save("vn.npy", vn), "--attn-mask", save("mask.npy", ~allowed)], o, w, 1)

# 4. mha (torch.nn.MultiheadAttention): a NaN query row, a batch whose keys are all padded, and
#    NaN in that batch's values.
torch.manual_seed(16)
m = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
st.write(f"{work}/p.safetensors", {n: t.detach().numpy() for n, t in m.state_dict().items()})
qm = q.copy(); qm[1, 4, :] = np.nan
vm = rng.standard_normal((2, 6, 8)).astype(np.float32); vm[0, 3, 5] = np.nan
kpm = np.zeros((2, 6), dtype=bool); kpm[0, :] = True
with torch.no_grad():
    o, w = m(torch.from_numpy(qm), torch.from_numpy(k), torch.from_numpy(vm), key_padding_mask=torch.from_numpy(kpm),
             need_weights=True, average_attn_weights=False)
o, w = o.numpy().copy(), w.numpy().copy()
o[0], w[0] = 0, 0
# with no out-projection bias the empty rows would be 0; torch adds b_o to the zero context
o[0] = m.out_proj.bias.detach().numpy()
run_case("mha NaN query row, padded batch, NaN in V",
         ["mha", "-q", save("qm.npy", qm), "-k", f"{work}/k.npy", "-v", save("vm.npy", vm), "--heads", "2",
          "--params", f"{work}/p.safetensors", "--key-padding-mask", save("kpm.npy", kpm)], o, w, 2 * 5)

# 5. --causal with Inf and NaN in V at keys that early rows cannot see: PyTorch's weights @ V gives
#    0 * Inf = NaN in those columns for every row, also where a tiled kernel skips the key (past
#    the block's last row, or past the row in the fused kernel's 16-key tiles). Both kernels of
#    the tiled path (docs/performance.md): the best this CPU runs, and BLAS.
import os
L = 600
qc, kc = (rng.standard_normal((1, 2, L, 8)).astype(np.float32) for _ in range(2))
vc = rng.standard_normal((1, 2, L, 4)).astype(np.float32)
vc[0, 0, 590, 1] = np.inf; vc[0, 1, 20, 2] = np.nan; vc[0, 1, 300, 3] = -np.inf
o, w = torch_sdpa(qc, kc, vc, scale, np.tril(np.ones((L, L), dtype=bool)))
for kernel in ("best", "blas"):
    os.environ["ATTNTRACE_ATTENTION_KERNEL"] = kernel
    run_case(f"sdpa --causal, Inf and NaN in V past early rows (kernel {kernel})",
             ["sdpa", "-q", save("qc.npy", qc), "-k", save("kc.npy", kc), "-v", save("vc.npy", vc), "--causal"], o, w, 0)
del os.environ["ATTNTRACE_ATTENTION_KERNEL"]

for f in failures: print("FAIL:", f, file=sys.stderr)
print(f"{'FAIL' if failures else 'ok'}: NaN semantics, 5 cases x 2 paths against PyTorch ({len(failures)} failures)")
sys.exit(1 if failures else 0)
PY
