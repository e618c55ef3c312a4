#!/usr/bin/env bash
# attntrace compare: exit 0/1 as numpy.allclose says, the reported largest differences and their
# positions checked against numpy's argmax, shape mismatches (1), unreadable files (3), and the
# --rtol/--atol flags.
source "$(dirname "$0")/cli_common.bash"
need_numpy

"$PYTHON" - "$W" <<'PY'
import sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(3)
b = rng.uniform(0.5, 2.0, (3, 4, 5))          # no zeros: the relative difference is finite
b[0, 3, 1] = 0.5
a = b * (1 + 1e-7 * rng.standard_normal(b.shape))   # close at the default tolerance
np.save(f"{w}/b.npy", b)
np.save(f"{w}/close.npy", a)
far = a.copy()
far[2, 1, 3] += 0.02    # the largest absolute difference; close at rtol 1e-1
far[0, 3, 1] *= 1.03    # the largest relative difference (3e-2; absolute 1.5e-2)
far[1, 0, 4] -= 0.001
np.save(f"{w}/far.npy", far)
nan = a.copy()
nan[1, 1, 1] = np.nan
np.save(f"{w}/nan.npy", nan)
np.save(f"{w}/t.npy", np.zeros((2, 3)))
np.save(f"{w}/tt.npy", np.zeros((3, 2)))
np.save(f"{w}/one.npy", np.array([1.0]))
np.save(f"{w}/two.npy", np.array([2.0]))
PY

# identical, and the same values through JSON
run 0 "$A" compare "$W/b.npy" "$W/b.npy"
[ "$(cat "$W/out")" = "$W/b.npy and $W/b.npy are close: 60 elements, max abs diff 0, max rel diff 0" ] ||
    fail "identical: $(cat "$W/out")"
"$A" convert "$W/b.npy" "$W/b.json"
run 0 "$A" compare "$W/b.json" "$W/b.npy"
run 0 "$A" compare "$W/close.npy" "$W/b.npy"
grep -q "are close: 60 elements" "$W/out" || fail "close: $(cat "$W/out")"
# from stdin
"$A" random --shape 4,3 --seed 2 -o "$W/r.npy"
"$A" random --shape 4,3 --seed 2 -o - | run 0 "$A" compare - "$W/r.npy"

# perturbed: exit 1, and the report agrees with numpy
run 1 "$A" compare "$W/far.npy" "$W/b.npy"
[ ! -s "$W/err" ] || fail "differences are not errors: $(cat "$W/err")"
"$PYTHON" - "$W/out" "$W/far.npy" "$W/b.npy" 1e-5 1e-8 <<'PY'
import re, sys, numpy as np
report = open(sys.argv[1]).read()
fa, fb, rtol, atol = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
a, b = np.load(fa), np.load(fb)
m = re.search(r"differ: (\d+) of (\d+) elements are not close", report)
assert m, report
assert int(m[1]) == int((~np.isclose(a, b, rtol=rtol, atol=atol)).sum()), (m[1], report)
assert int(m[2]) == a.size
for kind, d in (("abs", np.abs(a - b)), ("rel", np.abs(a - b) / np.abs(b))):
    m = re.search(rf"max {kind} diff (\S+) at \[([\d, ]*)\] \(a (\S+), b (\S+)\)", report)
    assert m, (kind, report)
    where = tuple(int(i) for i in m[2].split(", "))
    assert where == np.unravel_index(np.argmax(d), d.shape), (kind, where, report)
    assert np.isclose(float(m[1]), d.max(), rtol=1e-5, atol=0), (kind, m[1], d.max())
    assert np.isclose(float(m[3]), a[where], rtol=1e-5) and np.isclose(float(m[4]), b[where], rtol=1e-5)
print("compare: report agrees with numpy")
PY
grep -q "max abs diff 0.0[12][0-9]* at \[2, 1, 3\]" "$W/out" || fail "max abs position: $(cat "$W/out")"
grep -q "max rel diff 0.0[23][0-9]* at \[0, 3, 1\] (a 0.515, b 0.5)" "$W/out" || fail "max rel position: $(cat "$W/out")"

# the tolerance flags: loose enough passes, and rtol scales |B| (the second file)
run 0 "$A" compare "$W/far.npy" "$W/b.npy" --rtol 0.1
run 0 "$A" compare "$W/far.npy" "$W/b.npy" --rtol 0 --atol 0.03
run 1 "$A" compare "$W/far.npy" "$W/b.npy" --rtol 0 --atol 0.01
grep -q "(rtol 0, atol 0.01)" "$W/out" || fail "the report does not state the tolerances: $(cat "$W/out")"
run 0 "$A" compare "$W/one.npy" "$W/two.npy" --rtol 0.6 --atol 0   # |1-2| <= 0.6*2
run 1 "$A" compare "$W/two.npy" "$W/one.npy" --rtol 0.6 --atol 0   # |2-1| >  0.6*1
run 1 "$A" compare "$W/close.npy" "$W/b.npy" --rtol 0 --atol 0
# a bad tolerance is a usage error naming the flag (the library names the parameter)
usage_error "$A" compare "$W/close.npy" "$W/b.npy" --rtol -1
error_line "--rtol: must be a non-negative number, got -1"

# NaN is never close, even against itself
run 1 "$A" compare "$W/nan.npy" "$W/b.npy"
grep -q "1 pair holds a NaN" "$W/out" || fail "NaN not reported: $(cat "$W/out")"
run 1 "$A" compare "$W/nan.npy" "$W/nan.npy"

# different shapes differ (exit 1), they are not bad input
run 1 "$A" compare "$W/t.npy" "$W/tt.npy"
[ "$(cat "$W/out")" = "shapes differ: (2, 3) vs (3, 2)" ] || fail "shapes: $(cat "$W/out")"
[ ! -s "$W/err" ] || fail "a shape mismatch wrote an error"

# unreadable files: exit 3, one line naming the file
printf '\x93NUMPY garbage' >"$W/bad.npy"
run 3 "$A" compare "$W/bad.npy" "$W/b.npy"
error_line "$W/bad.npy"
run 3 "$A" compare "$W/b.npy" "$W/missing.npy"
error_line "$W/missing.npy"
run 3 "$A" compare "$W/b.npy" "$W"
error_line "$W"
echo "compare: ok"
