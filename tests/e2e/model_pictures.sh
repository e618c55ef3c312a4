#!/usr/bin/env bash
# Pictures of a whole model (attntrace model --plot / --heatmap / --report / --rollout / --scale,
# issue 28) on the tiny GPT-2 checkpoint and its tokenizer: every kept head drawn, the brightest
# cell of each row where the run's own --attentions has its largest weight (PNG, SVG, terminal),
# the tokens as a reader sees them on the axes, --rollout equal to `attntrace rollout` on the same
# run's --attentions, the font libraries loaded only by a picture, and the error paths: one line,
# exit 2/3, nothing written.
source "$(dirname "$0")/cli_common.bash"
need_numpy
PF="$PYTHON $(dirname "$0")/picture_files.py"
M="$FIXTURES/models/full_gpt2"
TEXT="the cat sat on the mat"
model=("$A" model "$M" --text "$TEXT" --top 0)

# One run: every output at once.
run 0 "${model[@]}" --attentions "$W/a.npy" --rollout "$W/r.npy" --plot "$W/p.png" --report "$W/r.html" --layers 0,2
for f in a.npy r.npy p.png r.html; do [ -s "$W/$f" ] || fail "$f was not written"; done

# --rollout equals `attntrace rollout` on the run's --attentions, one file per kept layer.
"$PYTHON" - "$W" <<'PY'
import numpy as np, sys
a = np.load(sys.argv[1] + "/a.npy")
for k in range(a.shape[0]):
    np.save(sys.argv[1] + "/w%d.npy" % k, a[k])
PY
run 0 "$A" rollout "$W/w0.npy" "$W/w1.npy" -o "$W/r_cmd.npy"
"$PYTHON" - "$W" <<'PY' || fail "--rollout differs from attntrace rollout on --attentions"
import numpy as np, sys
got, want = np.load(sys.argv[1] + "/r.npy"), np.load(sys.argv[1] + "/r_cmd.npy")
assert got.shape == want.shape == (7, 7), (got.shape, want.shape)
d = np.abs(got.astype(np.float64) - want).max()
assert d < 1e-6, "max |diff| %g" % d
PY
echo "ok --rollout equals attntrace rollout on --attentions"

# check_brightest SUMMARY: each thumbnail's brightest key per row is the row's largest weight in
# --attentions (row scale: each row's maximum is its brightest cell), or one within a colour
# step of it (256 colours: two weights within 1/256 of the row's maximum share the top colour).
check_brightest() {
    "$PYTHON" - "$1" "$W/a.npy" <<'PY' || fail "brightest cells of $1"
import json, sys, numpy as np
s, a = json.load(open(sys.argv[1])), np.load(sys.argv[2])
layers = [0, 2]
assert sorted(s["brightest"]) == sorted("%d.%d" % (l, h) for l in layers for h in range(4)), sorted(s["brightest"])
for k, l in enumerate(layers):
    for h in range(4):
        got = s["brightest"]["%d.%d" % (l, h)]
        for i, c in enumerate(got):
            row = a[k, h, i]
            assert row[c] >= row.max() * (1 - 1 / 256), (l, h, i, c, row.tolist())
PY
}
$PF png "$W/p.png" > "$W/png.json" || fail "the PNG does not decode"
check_brightest "$W/png.json"
run 0 "${model[@]}" --attentions "$W/a2.npy" --plot "$W/p.svg" --layers 0,2
cmp -s "$W/a.npy" "$W/a2.npy" || fail "--attentions changed between runs"
$PF svg "$W/p.svg" > "$W/svg.json" || fail "the SVG does not parse"
check_brightest "$W/svg.json"
"$PYTHON" - "$W/svg.json" <<'PY' || fail "the SVG's token labels"
import json, sys
s = json.load(open(sys.argv[1]))
tokens = ["t", "he", "\u2423cat", "\u2423sat", "\u2423on", "\u2423the", "\u2423mat"]  # GPT-2's "Ġcat" as " cat"
assert s["qlabels"] == tokens * 8 and s["klabels"] == tokens * 8, (s["qlabels"][:8], s["klabels"][:8])
assert s["scale"][-1] == "row max", s["scale"]
PY
echo "ok --plot PNG and SVG: every kept head, the brightest cells, the tokens on both axes"

# --heatmap off a terminal: ASCII, '@@' at each row's largest weight, every line within COLUMNS.
COLUMNS=80 run 0 "${model[@]}" --heatmap --layers 0,2 --attentions "$W/a3.npy"
"$PYTHON" - "$W/out" "$W/a3.npy" <<'PY' || fail "--heatmap cells"
import sys, numpy as np
lines, a = open(sys.argv[1], encoding="utf-8").read().split("\n"), np.load(sys.argv[2])
assert all(ord(c) < 128 for l in lines for c in l), "non-ASCII off a terminal"
for k, layer in enumerate([0, 2]):
    for h in range(4):
        start = next(i for i, l in enumerate(lines) if l.split(" (")[0] == "layer %d head %d" % (layer, h))
        rows = [l for l in lines[start + 1:start + 20] if l[:1].isdigit()][:7]
        for i, row in enumerate(rows):
            cells, w = row[7:], a[k, h, i]  # after "i ", the tokens (4 wide: "_cat") and a space
            assert w[cells.index("@@") // 2] >= w.max() * (1 - 1 / 18), (layer, h, i, row)  # 9 steps of the ramp
PY
grep -q '_cat' "$W/out" || fail "--heatmap: no space mark in ASCII"
for columns in 24 40 60; do
    COLUMNS=$columns run 0 "${model[@]}" --heatmap
    "$PYTHON" -c '
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith("every head:")) - 1  # the heatmaps follow the trace
bad = [l for l in lines[start:] if len(l) > int(sys.argv[2])]
assert not bad, bad[:3]' "$W/out" "$columns" || fail "COLUMNS=$columns: a line of the heatmaps is wider"
done
if command -v script > /dev/null; then
    COLUMNS=60 script -qec "$A model $M --text '$TEXT' --top 0 --heatmap --scale log" /dev/null > "$W/tty" || fail "--heatmap on a terminal"
    grep -q $'\x1b\[48;2' "$W/tty" || fail "no colour on a terminal"
    grep -q '␣cat' "$W/tty" || fail "the space mark is not shown on a terminal"
    grep -q 'scale: log from ' "$W/tty" || fail "the log scale is not named"
fi
echo "ok --heatmap: ASCII in a pipe, colour on a terminal, within COLUMNS"

# The JSON trace alone on stdout; the heatmaps go to stderr.
run 0 "${model[@]}" --format json --heatmap
"$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$W/out" || fail "--format json --heatmap: stdout is not one JSON document"
grep -q '^layer 0 head 0' "$W/err" || fail "--format json --heatmap: no heatmaps on stderr"

# The font libraries: a picture-less model run never opens them, a --plot run does.
if command -v strace > /dev/null && strace -f -qq -o /dev/null true 2> /dev/null; then
    FONT_LIBS='libcairo|libpango|libfontconfig|libfreetype|libharfbuzz'
    run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "${model[@]}" --rollout "$W/r2.npy" --heatmap
    ! grep -qE "$FONT_LIBS" "$W/trace.txt" || fail "model without --plot opened: $(grep -E "$FONT_LIBS" "$W/trace.txt" | head -3)"
    run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "${model[@]}" --plot "$W/p2.png"
    for lib in libpangocairo libcairo libfontconfig libfreetype libharfbuzz; do
        grep -q "$lib.*= [0-9]" "$W/trace.txt" || fail "model --plot did not open $lib"
    done
    echo "ok the font libraries: only a --plot run opens them"
else
    echo "skip the strace check: strace cannot trace here"
fi

# Errors: one line, exit 2 (flags), 3 (memory) or 4 (an output file), and no file written.
rm -f "$W"/x.*
usage_error "${model[@]}" --plot "$W/x.jpg"
error_line "--plot" ".png or .svg"
usage_error "${model[@]}" --report "$W/x.htm"
error_line "--report" ".html"
usage_error "${model[@]}" --rollout "$W/x.json"
error_line "--rollout" ".npy"
usage_error "${model[@]}" --plot "$W/x.png" --scale sqrt
error_line "--scale: 'sqrt' is not a colour scale; use linear, row or log"
usage_error "${model[@]}" --scale log
error_line "--scale: a colour scale needs --heatmap, --plot or --report"
printf 'the cat\n' > "$W/lines.txt"
usage_error "$A" model "$M" --each-line "$W/lines.txt" --plot "$W/x.png"
error_line "not with --each-line"
run 4 "${model[@]}" --rollout "$M/ids.npy"  # exit 4: an output's problem, as for every command
error_line "ids.npy" "refusing to overwrite an input file"
usage_error "${model[@]}" --plot "$W/x.png" --report "$W/x.png"
run 4 "${model[@]}" --plot "$W/no/such/dir/x.png" --report "$W/x.html"
error_line "x.png"
[ ! -e "$W/x.html" ] || fail "the report was written although the plot could not be"
run 0 "${model[@]}" --max-memory 1M  # the run alone fits (about 90 KB) ...
run 3 "${model[@]}" --plot "$W/x.png" --report "$W/x.html" --max-memory 1M  # ... its pictures do not (5 MB)
error_line "--max-memory" "the pictures"
ls "$W"/x.* > /dev/null 2>&1 && fail "an error left a file: $(ls "$W"/x.*)"
echo "model pictures: ok"
