#!/usr/bin/env bash
# attntrace info on every good .npy fixture (every dtype, byte order, order, version, 0-d and
# empty) and every good JSON fixture, plus tensors made here: the --json lines are read by jq and
# by Python's json, and every field is checked against numpy (stats within 1e-6 relative).
source "$(dirname "$0")/cli_common.bash"
need_numpy

# tensors with NaN/Inf, a big one, and one from attntrace itself
"$PYTHON" - "$W" <<'PY'
import sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(5)
a = rng.standard_normal((3, 4, 5)).astype(np.float32)
a[0, 0, 0], a[1, 2, 3], a[2, 3, 4] = np.nan, np.inf, -np.inf
np.save(f"{w}/nan_inf.npy", a)
np.save(f"{w}/all_nan.npy", np.full((2, 2), np.nan))
np.save(f"{w}/offset.npy", 1e6 + rng.standard_normal(1000))
np.save(f"{w}/fortran.npy", np.asfortranarray(rng.standard_normal((4, 3))))
PY
"$A" random --shape 2,10,6 --seed 3 -o "$W/random_f32.npy"
"$A" random --shape 7,5 --seed 4 --dist uniform --dtype f64 -o "$W/random_f64.npy"

files=("$FIXTURES"/npy/good/*.npy)
for f in "$FIXTURES"/json/*.json; do [ "$(basename "$f")" = expected.json ] || files+=("$f"); done
files+=("$W"/*.npy)
[ "${#files[@]}" -gt 10 ] || fail "too few fixtures found under $FIXTURES"

run 0 "$A" info --json "${files[@]}"
[ ! -s "$W/err" ] || fail "info wrote to stderr"
cp "$W/out" "$W/info.jsonl"
[ "$(wc -l <"$W/info.jsonl")" = "${#files[@]}" ] || fail "not one line per file"
if command -v jq >/dev/null; then
    [ "$(jq -s length "$W/info.jsonl")" = "${#files[@]}" ] || fail "jq does not read one object per line"
    [ "$(jq -r 'select(.file | endswith("random_f32.npy")) | .shape | map(tostring) | join(",")' "$W/info.jsonl")" = 2,10,6 ] ||
        fail "jq: wrong shape for random_f32.npy"
    [ "$(jq -r 'select(.file | endswith("random_f64.npy")) | .dtype' "$W/info.jsonl")" = float64 ] ||
        fail "jq: wrong dtype for random_f64.npy"
else
    echo "note: jq not installed, its checks skipped"
fi

"$PYTHON" - "$W/info.jsonl" "$FIXTURES" <<'PY'
import json, math, pathlib, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from make_cli_fixtures import finite_stats   # min/max/mean/std over the finite values, numpy-checked

fixtures = pathlib.Path(sys.argv[2])
json_expected = {e["file"]: e for e in json.loads((fixtures / "json" / "expected.json").read_text())}
bad = []

def expect(path):
    if path.suffix == ".json":
        e = json_expected[path.name]
        values = np.array([np.frombuffer(bytes.fromhex(b)[::-1], "<f8")[0] for b in e["f8_bits"]])
        return dict(format="json", npy_version=None, dtype=e["dtype"], shape=e["shape"], order="C",
                    values=values.reshape(e["shape"]))
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        shape, fortran, dtype = np.lib.format._read_array_header(f, version)
    return dict(format="npy", npy_version="%d.%d" % version, dtype=dtype.name, shape=list(shape),
                order="F" if fortran else "C", values=np.load(path).astype(np.float64))

def close(got, want):
    if want is None or got is None:
        return got is None and want is None
    return abs(got - want) <= 1e-6 * abs(want) + 1e-300

lines = pathlib.Path(sys.argv[1]).read_text().splitlines()
for line in lines:
    j = json.loads(line)
    path = pathlib.Path(j["file"])
    e = expect(path)
    st = finite_stats(e["values"])
    num = lambda k: None if math.isnan(float.fromhex(st[k])) else float.fromhex(st[k])
    want = {"format": e["format"], "npy_version": e["npy_version"], "dtype": e["dtype"],
            "shape": e["shape"], "order": e["order"], "elements": int(np.prod(e["shape"], dtype=np.int64)),
            "nan": st["nan"], "inf": st["inf"]}
    for k, v in want.items():
        if j[k] != v:
            bad.append(f"{path.name}: {k} is {j[k]!r}, numpy says {v!r}")
    for k in ("min", "max", "mean", "std"):
        w = num(k)
        if w is not None and not math.isfinite(w):
            w = None
        if not close(j[k], w):
            bad.append(f"{path.name}: {k} is {j[k]!r}, numpy says {w!r}")
    if list(j) != ["file", "format", "npy_version", "dtype", "shape", "order", "elements",
                   "min", "max", "mean", "std", "nan", "inf"]:
        bad.append(f"{path.name}: keys {list(j)}")
print(f"info: {len(lines)} files checked against numpy")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY

# the human form: a header line and a statistics line per file
f4="$FIXTURES/npy/good/f4_le_c.npy"
run 0 "$A" info "$f4" "$W/nan_inf.npy"
[ "$(sed -n 1p "$W/out")" = "$f4: npy 1.0, float32, shape (2, 3, 2), C order, 12 elements" ] ||
    fail "info text header: $(sed -n 1p "$W/out")"
grep -Eq '^  min [-0-9.e+]+  max [-0-9.e+]+  mean [-0-9.e+]+  std [-0-9.e+]+  nan 1  inf 2$' <(sed -n 2p "$W/out") ||
    fail "info text stats line: $(sed -n 2p "$W/out")"
[ "$(sed -n 3p "$W/out")" = "$W/nan_inf.npy: npy 1.0, float32, shape (3, 4, 5), C order, 60 elements" ] ||
    fail "second file's header: $(sed -n 3p "$W/out")"
grep -q '^  min n/a  max n/a  mean n/a  std n/a  nan 4  inf 0$' <("$A" info "$W/all_nan.npy") ||
    fail "all-NaN stats are not n/a"

# stdin, npy and JSON: the same line as from the file, with "file": "-"
for f in "$f4" "$FIXTURES/json/object_nested.json"; do
    "$A" info --json "$f" | sed 's|"file":"[^"]*"|"file":"-"|' >"$W/want"
    "$A" info --json - <"$f" >"$W/got"
    cmp -s "$W/want" "$W/got" || fail "info - differs from info $f: $(cat "$W/got")"
done

# the first bad file stops the run, after the good ones before it were printed
run 3 "$A" info --json "$f4" "$W/missing.npy" "$W/random_f32.npy"
error_line "$W/missing.npy"
[ "$(wc -l <"$W/out")" = 1 ] || fail "expected only the first file's line before the error"
echo "info: ok"
