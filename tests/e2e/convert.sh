#!/usr/bin/env bash
# attntrace convert: npy -> json -> npy round trips checked with numpy, the output dtype rule,
# stdin/stdout pipelines, and the output safety promises (never over the input, nothing written
# on a failure, an existing output left as it was).
source "$(dirname "$0")/cli_common.bash"
need_numpy

# finite tensors in several dtypes and orders (JSON has no NaN/Inf)
mkdir "$W/in"
"$PYTHON" - "$W/in" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(11)
x = rng.standard_normal((2, 3, 4))
np.save(f"{d}/f8.npy", x)
np.save(f"{d}/f4_f.npy", np.asfortranarray(x.astype(np.float32)))
np.save(f"{d}/f4_be.npy", x.astype(">f4"))
np.save(f"{d}/f2.npy", x.astype(np.float16))
np.save(f"{d}/i4.npy", (100 * x).astype(np.int32))
np.save(f"{d}/u1.npy", np.arange(12, dtype=np.uint8).reshape(3, 4))
np.save(f"{d}/b1.npy", x > 0)
np.save(f"{d}/scalar_f8.npy", np.array(0.1))
np.save(f"{d}/empty_f4.npy", np.zeros((2, 0, 3), np.float32))
np.save(f"{d}/tiny_f4.npy", np.array([1e-45, 3.4028235e38, -0.0, 0.1], np.float32))
PY

for src in "$W"/in/*.npy; do
    name=$(basename "$src" .npy)
    "$A" convert "$src" "$W/$name.json" || fail "convert $name.npy to json"
    "$A" convert "$W/$name.json" "$W/$name.back.npy" || fail "convert $name.json to npy"
done
"$PYTHON" - "$W" <<'PY'
import json, pathlib, sys
import numpy as np
w = pathlib.Path(sys.argv[1])
bad = []
for src in sorted((w / "in").glob("*.npy")):
    x = np.load(src)
    want = np.float64 if x.dtype == np.float64 else np.float32   # the output dtype rule
    j = json.loads((w / f"{src.stem}.json").read_text())
    back = np.load(w / f"{src.stem}.back.npy")
    if j["shape"] != list(x.shape) or j["dtype"] != np.dtype(want).name:
        bad.append(f"{src.name}: json header {j['shape']} {j['dtype']}")
    # float32 values are printed shortest-for-float32: parse as double, round to float32
    if not np.array_equal(np.array(j["data"], dtype=np.float64).astype(want).reshape(x.shape), x.astype(want)):
        bad.append(f"{src.name}: json data differ")
    if back.dtype != want or back.shape != x.shape or not np.array_equal(back, x.astype(want)):
        bad.append(f"{src.name}: round trip gives {back.dtype} {back.shape}")
    if not back.flags.c_contiguous:
        bad.append(f"{src.name}: written in Fortran order")
print(f"convert: {len(list((w / 'in').glob('*.npy')))} round trips checked with numpy")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY

# --dtype overrides the rule, both ways
"$A" convert "$W/in/f4_f.npy" "$W/up.npy" --dtype f64
"$A" convert "$W/in/f8.npy" "$W/down.json" --dtype f32
"$PYTHON" - "$W" <<'PY'
import json, sys, numpy as np
w = sys.argv[1]
up = np.load(f"{w}/up.npy")
assert up.dtype == np.float64 and np.array_equal(up, np.load(f"{w}/in/f4_f.npy").astype(np.float64)), "--dtype f64"
down = json.load(open(f"{w}/down.json"))
assert down["dtype"] == "float32", down["dtype"]
want = np.load(f"{w}/in/f8.npy").astype(np.float32)
assert np.array_equal(np.array(down["data"], dtype=np.float32), want), "--dtype f32 values"
PY

# pipelines through stdin and stdout
"$A" random --shape 2,3 --seed 5 -o "$W/r.npy"
"$A" random --shape 2,3 --seed 5 -o - | "$A" info - >"$W/out"
grep -q '^-: npy 1.0, float32, shape (2, 3), C order, 6 elements$' "$W/out" || fail "random | info -: $(cat "$W/out")"
"$A" random --shape 2,3 --seed 5 -o - | "$A" convert - "$W/piped.json"
"$A" random --shape 2,3 --seed 5 -o - --to json | "$A" convert - "$W/piped2.npy"
"$A" convert "$W/r.npy" - --to npy | cmp -s - "$W/r.npy" || fail "convert to stdout is not the same npy"
if command -v jq >/dev/null; then
    [ "$("$A" convert "$W/r.npy" - --to json | jq -c .shape)" = "[2,3]" ] || fail "convert - --to json | jq"
fi
"$PYTHON" - "$W" <<'PY'
import io, json, subprocess, sys, numpy as np
w = sys.argv[1]
r = np.load(f"{w}/r.npy")
assert np.array_equal(np.array(json.load(open(f"{w}/piped.json"))["data"], np.float32), r), "random | convert - x.json"
assert np.array_equal(np.load(f"{w}/piped2.npy"), r), "random --to json | convert - x.npy"
PY
"$A" convert "$W/piped.json" - --to npy | "$PYTHON" -c '
import io, sys, numpy as np
a = np.load(io.BytesIO(sys.stdin.buffer.read()))
assert a.shape == (2, 3) and a.dtype == np.float32, (a.shape, a.dtype)'

# never over its own input, however it is spelled; the input stays as it was
cp "$W/r.npy" "$W/r.orig"
run 4 "$A" convert "$W/r.npy" "$W/r.npy"
error_line r.npy
(cd "$W" && run 4 "$A" convert r.npy ./r.npy)
ln "$W/r.npy" "$W/r_link.npy"
run 4 "$A" convert "$W/r.npy" "$W/r_link.npy"
cmp -s "$W/r.npy" "$W/r.orig" || fail "the input was changed"

# a missing directory: exit 4, nothing created
run 4 "$A" convert "$W/r.npy" "$W/nodir/r.json"
error_line "$W/nodir/r.json"
[ ! -e "$W/nodir" ] || fail "the missing directory was created"
# a directory as the output
mkdir "$W/adir"
run 4 "$A" convert "$W/r.npy" "$W/adir" --to npy
error_line "$W/adir"
[ -d "$W/adir" ] && [ -z "$(ls -A "$W/adir")" ] || fail "the directory output was disturbed"

# a bad input leaves an existing output as it was, and no temporary file behind
mkdir "$W/safe"
printf 'not a tensor' >"$W/safe/bad.npy"
cp "$W/piped.json" "$W/safe/out.json"
run 3 "$A" convert "$W/safe/bad.npy" "$W/safe/out.json"
error_line bad.npy
cmp -s "$W/safe/out.json" "$W/piped.json" || fail "a failed convert changed the existing output"
[ "$(ls -A "$W/safe" | sort | tr '\n' ' ')" = "bad.npy out.json " ] || fail "left behind: $(ls -A "$W/safe")"
run 3 "$A" convert "$W/safe/missing.npy" "$W/safe/new.json"
[ ! -e "$W/safe/new.json" ] || fail "a failed convert created its output"
echo "convert: ok"
