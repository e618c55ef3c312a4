#!/usr/bin/env bash
# Pictures of attention (--plot FILE.png|.svg, --heatmap, rollout --plot), read back with Python's
# standard library (tests/e2e/picture_files.py: zlib for the PNG, xml.etree for the SVG).
# The input is crafted: query i of head h is one-hot on key TARGET[h][i] (scores 0 or 40), so the
# brightest cell of each row must sit at that key, in every panel, in both formats and in the
# terminal ramp. Also: panel count (one per head + the mean), tick labels from --labels, the
# pooling header, --show-heads / --batch, and the error paths.
source "$(dirname "$0")/cli_common.bash"
need_numpy
PF="$PYTHON $(dirname "$0")/picture_files.py"

# Q (2, 2, 6, 6) = 40 * one-hot rows, K = one-hot keys: q_i . k_j = 40 when key j carries query
# i's position. Head h's permutation PERM[h] maps key j to position PERM[h][j].
"$PYTHON" - "$W" <<'PY'
import json, sys, numpy as np
w = sys.argv[1]
perm = np.array([[[3, 0, 5, 1, 4, 2], [1, 2, 3, 4, 5, 0]], [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]]])
q = np.zeros((2, 2, 6, 6), np.float32); k = np.zeros_like(q)
for b in range(2):
    for h in range(2):
        q[b, h] = 40 * np.eye(6)
        k[b, h] = np.eye(6)[perm[b, h]]        # key j is one-hot at perm[j]
np.save(w + "/q.npy", q); np.save(w + "/k.npy", k); np.save(w + "/v.npy", np.ones((2, 2, 6, 3), np.float32))
target = np.argsort(perm, axis=-1)              # query i's key: the j with perm[j] == i
json.dump(target.tolist(), open(w + "/target.json", "w"))
open(w + "/tokens.txt", "w").write("\n".join(["<s>", "the", "cat", "sat", "on", "mat"]) + "\n")
PY
SDPA=("$A" sdpa -q "$W/q.npy" -k "$W/k.npy" -v "$W/v.npy" --scale 1)

# check_brightest SUMMARY.json BATCH HEADS...: each listed head's brightest keys are TARGET[BATCH][h].
check_brightest() {
    "$PYTHON" - "$1" "$W/target.json" "$2" "${@:3}" <<'PY' || fail "brightest cells of $1"
import json, sys
s, target, batch = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
for h in sys.argv[4:]:
    got, want = s["brightest"][h], target[batch][int(h)]
    assert got == want, "head %s: brightest keys %s, expected %s" % (h, got, want)
PY
}

# PNG: 2 heads + the mean = 3 panels; each head's brightest keys where the pattern puts them.
run 0 "${SDPA[@]}" --trace none --plot "$W/p.png"
$PF png "$W/p.png" > "$W/png.json" || fail "the PNG does not decode"
"$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert [p["head"] for p in s["panels"]] == [0, 1, -1], s["panels"]' "$W/png.json" || fail "PNG panels"
check_brightest "$W/png.json" 0 0 1

# SVG, batch 1, with labels: the same checks, and the tick labels are the tokens.
run 0 "${SDPA[@]}" --trace none --plot "$W/p.svg" --batch 1 --labels "$W/tokens.txt"
$PF svg "$W/p.svg" > "$W/svg.json" || fail "the SVG does not parse"
check_brightest "$W/svg.json" 1 0 1
"$PYTHON" - "$W/svg.json" <<'PY' || fail "SVG panels or labels"
import json, sys
s = json.load(open(sys.argv[1]))
tokens = ["<s>", "the", "cat", "sat", "on", "mat"]
assert [p["head"] for p in s["panels"]] == [0, 1, -1], s["panels"]
assert s["qlabels"] == tokens * 3 and s["klabels"] == tokens * 3, (s["qlabels"], s["klabels"])
assert s["title"] and s["title"][0].startswith("sdpa"), s["title"]
assert len(s["scale"]) == 3 and s["scale"][0] == "0", s["scale"]
PY

# Real type: labels in any script. Query 5's label is an emoji: its glyph comes from Noto Color
# Emoji through fontconfig's fallback, so the label's room left of row 5 holds coloured pixels (a
# missing glyph would be a grey box); the other rows' labels are ink only (grey).
printf '%s\n' '<s>' 'café' '你好' 'مرحبا' '␣the' '😀' > "$W/scripts.txt"
run 0 "${SDPA[@]}" --trace none --plot "$W/scripts.png" --labels "$W/scripts.txt" --show-heads 0
"$PYTHON" - "$W/scripts.png" "$(dirname "$0")" <<'PY' || fail "the emoji label is not drawn in colour"
import json, sys
sys.path.insert(0, sys.argv[2])
from picture_files import read_png
w, h, rows, text = read_png(sys.argv[1])
p = json.loads(text["attntrace:panels"])[0]
def colourful(r):  # pixels of row r's label room whose channels spread (not grey ink, not white)
    n = 0
    for y in range(p["y"] + r * p["cell"], p["y"] + (r + 1) * p["cell"]):
        for x in range(max(0, p["x"] - 40), p["x"] - 2):
            px = rows[y][3 * x:3 * x + 3]
            n += max(px) - min(px) > 80
    return n
assert colourful(5) > 10, "row 5 (emoji): %d colourful pixels" % colourful(5)
assert all(colourful(r) == 0 for r in range(5)), [colourful(r) for r in range(5)]
PY

# --show-heads picks panels; one head: no mean panel.
run 0 "${SDPA[@]}" --trace none --plot "$W/one.svg" --show-heads 1
$PF svg "$W/one.svg" > "$W/one.json"
"$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert [p["head"] for p in s["panels"]] == [1, -1], s["panels"]' "$W/one.json" || fail "--show-heads 1"

# --heatmap off a terminal: the ASCII ramp, '@' at each query's key (two characters per cell).
run 0 "${SDPA[@]}" --heatmap --batch 1
grep -q "one cell = 1 query x 1 key" "$W/out" || fail "--heatmap header"
"$PYTHON" - "$W/out" "$W/target.json" <<'PY' || fail "--heatmap cells"
import json, sys
lines, target = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
first = next(i for i, l in enumerate(lines) if l.startswith("heatmaps of batch 1"))
for h in (0, 1):  # "head 0" or "head 0 (diagonal)": its role from the head detectors
    start = next(i for i in range(first, len(lines)) if lines[i].split(" (")[0] == "head %d" % h) + 1
    for i in range(6):
        cells = lines[start + i][2:]          # "i " then two characters per key
        assert len(cells) == 12 and set(cells) <= set(" .:-=+*#%@"), cells
        assert cells.index("@") // 2 == target[1][h][i], (h, i, cells)
PY
grep -q $'\x1b' "$W/out" && fail "escape codes off a terminal"

# Fit to COLUMNS by pooling: 40 keys into 20 columns -> cells of 2x2 at most 8 cells wide.
"$PYTHON" -c 'import numpy as np,sys; np.save(sys.argv[1], np.random.default_rng(0).normal(size=(2, 40, 8)).astype(np.float32))' "$W/x.npy"
COLUMNS=20 run 0 "$A" mha -q "$W/x.npy" --heads 2 --trace none --heatmap
tr '\n' ' ' <"$W/out" | grep -q "one cell = 5 queries x 5 keys (mean weight)" || fail "COLUMNS=20 pooling header"
# Every line of the heatmap section fits COLUMNS, header and scale included, in a pipe (the ramp)
# and on a terminal (colour half-blocks, run under `script`; escapes do not take columns).
visible_width_over() {  # FILE COLUMNS: the lines of FILE wider than COLUMNS once escapes are removed
    "$PYTHON" -c '
import re, sys
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    text = re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip("\r")
    if len(text) > int(sys.argv[2]): print(len(text), repr(text))' "$1" "$2"
}
for columns in 20 40 60; do
    COLUMNS=$columns run 0 "$A" mha -q "$W/x.npy" --heads 2 --trace none --heatmap
    [ -z "$(visible_width_over "$W/out" "$columns")" ] || fail "COLUMNS=$columns: $(visible_width_over "$W/out" "$columns")"
    COLUMNS=$columns script -qec "$A mha -q $W/x.npy --heads 2 --trace none --heatmap" /dev/null >"$W/tty" ||
        fail "heatmap on a terminal"
    grep -q $'\x1b\[48;2' "$W/tty" || fail "no colour on a terminal"
    [ -z "$(visible_width_over "$W/tty" "$columns")" ] || fail "terminal, COLUMNS=$columns: $(visible_width_over "$W/tty" "$columns")"
done

# rollout: numpy's product of (mean over heads + I, renormalised), and its picture.
"$PYTHON" - "$W" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(1)
for l in range(3):
    s = rng.normal(size=(2, 3, 6, 6)); e = np.exp(s - s.max(-1, keepdims=True))
    np.save(sys.argv[1] + "/w%d.npy" % l, (e / e.sum(-1, keepdims=True)).astype(np.float32))
PY
run 0 "$A" rollout "$W/w0.npy" "$W/w1.npy" "$W/w2.npy" -o "$W/r.npy" --plot "$W/r.svg" --labels "$W/tokens.txt"
"$PYTHON" - "$W" <<'PY' || fail "rollout against numpy"
import numpy as np, sys
out = None
for l in range(3):
    a = np.load(sys.argv[1] + "/w%d.npy" % l).astype(np.float64).mean(1) + np.eye(6)
    a /= a.sum(-1, keepdims=True)
    out = a if out is None else a @ out
got = np.load(sys.argv[1] + "/r.npy")
assert got.shape == (2, 6, 6) and np.abs(got - out).max() < 1e-5, np.abs(got - out).max()
PY
$PF svg "$W/r.svg" > "$W/r.json" || fail "rollout SVG"
"$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert [p["head"] for p in s["panels"]] == [0], s["panels"]' "$W/r.json" || fail "rollout panels"

# The colour scale: the legend names it in every picture; row is the default; a bad name is exit 2
# naming the flag (--picture-scale for sdpa and mha, whose --scale is the softmax's; --scale for rollout).
run 0 "${SDPA[@]}" --trace none --plot "$W/row.svg"
grep -q '<text class="scale-name"[^>]*>row scale</text>' "$W/row.svg" || fail "the SVG's colour bar does not name the row scale"
grep -q '<text class="legend"[^>]*>colour scale: row (each row from 0 to its own maximum)</text>' "$W/row.svg" || fail "the SVG's legend"
run 0 "${SDPA[@]}" --trace none --plot "$W/log.svg" --picture-scale log --heatmap
grep -q '<text class="scale-name"[^>]*>log scale</text>' "$W/log.svg" || fail "the SVG's colour bar does not name the log scale"
grep -q '^scale: log from ' "$W/out" || fail "the heatmap does not name the log scale: $(grep scale: "$W/out")"
run 0 "$A" rollout "$W/w0.npy" "$W/w1.npy" --heatmap --scale linear
grep -q '^scale: linear from 0 to ' "$W/out" || fail "rollout --scale linear"
usage_error "${SDPA[@]}" --plot "$W/p.png" --picture-scale sqrt
error_line "--picture-scale: 'sqrt' is not a colour scale; use linear, row or log"
usage_error "${SDPA[@]}" --picture-scale log
error_line "--picture-scale: a colour scale needs --heatmap, --plot or --report"

# Errors: exit 2 for flags, 3 for files that do not fit.
usage_error "${SDPA[@]}" --plot "$W/p.jpg"
error_line "--plot" ".png or .svg"
usage_error "${SDPA[@]}" --plot "$W/p.png" --show-heads 5
error_line "--show-heads: head 5 is out of range"
usage_error "${SDPA[@]}" --heatmap --batch 2
error_line "--batch: 2 is out of range"
usage_error "${SDPA[@]}" --labels "$W/tokens.txt"
error_line "--labels" "need --heatmap"
printf 'a\nb\n' > "$W/two.txt"
run 3 "${SDPA[@]}" --plot "$W/p.png" --labels "$W/two.txt"
error_line "two.txt" "2 labels" "6 queries"
usage_error "$A" rollout "$W/w0.npy"
error_line "nothing to do"
echo "pictures: ok"
