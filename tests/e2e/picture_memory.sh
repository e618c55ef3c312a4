#!/usr/bin/env bash
# Pictures of long sequences without L x L memory: at L = 32768 the weights would be 4 GiB, but
# --plot (and --heatmap, and the head detectors) use weights pooled to 1024 x 1024 cells inside
# the tiled path, so the run's peak RSS stays within 600 MB and close to the same run without
# pictures. The PNG must still show the causal triangle: above the diagonal every cell is empty.
source "$(dirname "$0")/cli_common.bash"
need_numpy
"$A" random --shape 1,32768,8 --seed 5 -o "$W/q.npy"

# peak RSS FILE ARGS...: runs attntrace, writes its peak resident set (MB) to FILE.
peak() {
    local file=$1
    shift
    "$PYTHON" - "$file" "$A" "$@" <<'PY' || fail "run failed: $*"
import resource, subprocess, sys
subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024))
PY
}
SDPA=(sdpa -q "$W/q.npy" -k "$W/q.npy" -v "$W/q.npy" --causal)
peak "$W/base" "${SDPA[@]}" -o "$W/o.npy"
peak "$W/plot" "${SDPA[@]}" -o "$W/o2.npy" --plot "$W/p.png" --heatmap
base=$(cat "$W/base") plot=$(cat "$W/plot")
echo "peak RSS at L = 32768: $base MB without pictures, $plot MB with --plot and --heatmap"
[ "$plot" -le 600 ] || fail "peak RSS $plot MB with --plot is over 600 MB"
[ "$plot" -le $((base + 64)) ] || fail "pictures cost $((plot - base)) MB over the run without them ($base MB)"
# The same output with pictures, to float rounding: a run that draws takes the BLAS path's
# products, one that does not may take the fused kernel (docs/performance.md).
"$PYTHON" - "$W/o.npy" "$W/o2.npy" <<'PY' || fail "the output changed with --plot"
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6), np.abs(a - b).max()
PY
"$PYTHON" - "$W/p.png" "$(dirname "$0")" <<'PY' || fail "the L = 32768 picture"
import json, sys
sys.path.insert(0, sys.argv[2])
from picture_files import read_png
w, h, rows, text = read_png(sys.argv[1])
p = json.loads(text["attntrace:panels"])[0]
assert p["rows"] == p["cols"] and p["rows"] <= 1024, p
dark = rows[p["y"] + 2][3 * (p["x"] + p["cell"] * (p["cols"] - 1)):][:3]   # top right: above the diagonal
assert tuple(dark) == (0x44, 0x01, 0x54), "top-right cell is %s, expected viridis(0)" % (tuple(dark),)
PY

# The progress bar (a run expected to take over a second): on stderr only when it is a terminal.
run 0 "$A" "${SDPA[@]}" --trace none -o "$W/o3.npy"
[ -s "$W/err" ] && fail "progress output on a stderr that is not a terminal"
if command -v script > /dev/null; then
    script -qec "$A ${SDPA[*]} --trace none --threads 1 -o $W/o4.npy" /dev/null > "$W/tty" 2>&1 || fail "run under a terminal"
    grep -q 'attention \[' "$W/tty" || fail "no progress bar on a terminal"
fi
echo "picture memory: ok"
