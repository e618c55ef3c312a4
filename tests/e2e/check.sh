#!/usr/bin/env bash
# attntrace check on every case of tests/fixtures/check (made by tests/goldens/make_check_fixtures.py
# from other people's attention code, correct or with one known mistake): the exit code, each
# stage's status, the first divergence and the diagnosis code of --format json (read by jq) equal
# what the script implemented, and the text report names the layouts and conventions it read.
# Then the JSON document's exact keys, --rtol/--atol, a shape mismatch, and the error paths.
source "$(dirname "$0")/cli_common.bash"
need_numpy
command -v jq >/dev/null || { echo "SKIP: no jq"; exit 77; }
CASES="$FIXTURES/check"
cd "$SRC"

checked=0
for dir in "$CASES"/*/; do
    name=$(basename "$dir")
    read -r -a args < "$dir/args"
    expect="$dir/expect.json"
    want=$(jq .exit "$expect")
    run "$want" "$A" check "$dir/stages" "${args[@]}" --format json
    [ "$(jq -c .first_divergence "$W/out")" = "$(jq -c .first_divergence "$expect")" ] ||
        fail "$name: first divergence $(jq -c .first_divergence "$W/out"), expected $(jq -c .first_divergence "$expect")"
    [ "$(jq -c '.diagnosis.code // null' "$W/out")" = "$(jq -c .code "$expect")" ] ||
        fail "$name: diagnosis $(jq -c .diagnosis "$W/out"), expected code $(jq -c .code "$expect")"
    [ "$(jq -c '.diagnosis.stage // null' "$W/out")" = "$(jq -c .first_divergence "$expect")" ] ||
        fail "$name: the diagnosis is not about the first diverging stage"
    while IFS=$'\t' read -r stage status; do
        got=$(jq -r --arg s "$stage" '.stages[] | select(.name == $s) | .status' "$W/out")
        [ "$got" = "$status" ] || fail "$name: stage $stage is '$got', expected '$status'"
    done < <(jq -r '.statuses | to_entries[] | "\(.key)\t\(.value)"' "$expect")
    # every stage without a file is "missing", with no numbers
    n_missing=$(jq '[.stages[] | select(.status == "missing")] | length' "$W/out")
    [ "$n_missing" = "$(( $(jq '.stages | length' "$W/out") - $(jq '.statuses | length' "$expect") ))" ] ||
        fail "$name: $n_missing stages missing"
    [ "$(jq '[.stages[] | select(.status == "missing" and (.max_abs != null or .where != null))] | length' "$W/out")" = 0 ] ||
        fail "$name: a missing stage has numbers"
    # the text report: the same verdict, and what was recognised
    run "$want" "$A" check "$dir/stages" "${args[@]}"
    while IFS= read -r text; do
        grep -qF -- "$text" "$W/out" || fail "$name: the text report does not say '$text'"
    done < <(jq -r '.text[]' "$expect")
    checked=$((checked + 1))
done
[ "$checked" -ge 17 ] || fail "only $checked cases in $CASES"

# The JSON document: exactly these keys; numbers where a stage was compared, its position as indices.
bloem=(-q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors)
# a bad tolerance is a usage error naming the flag (the library names the parameter)
usage_error "$A" check "$CASES/correct_bloem_f32/stages" "${bloem[@]}" --atol nan
error_line "--atol: must be a non-negative number, got nan"
run 1 "$A" check "$CASES/bloem_wrong_scale/stages" "${bloem[@]}" --format json
[ "$(jq -c 'keys' "$W/out")" = '["diagnosis","first_divergence","stages"]' ] || fail "top-level keys"
[ "$(jq -c '[.stages[] | keys] | unique' "$W/out")" = '[["max_abs","max_rel","name","status","where"]]' ] ||
    fail "stage keys: $(jq -c '[.stages[] | keys] | unique' "$W/out")"
[ "$(jq -c '.diagnosis | keys' "$W/out")" = '["code","detail","stage"]' ] || fail "diagnosis keys"
[ "$(jq -c '[.stages[].name]' "$W/out")" = "$(jq -c '[.stages[].name]' <("$A" check "$CASES/correct_bloem_f32/stages" "${bloem[@]}" --format json))" ]
[ "$(jq -r '.stages[] | select(.name == "scores") | .where | length' "$W/out")" = 4 ] || fail "where of scores is not 4 indices"
jq -e '.stages[] | select(.name == "scores") | .max_abs > 0.1 and .max_rel > 0.1' "$W/out" >/dev/null || fail "scores' errors"
jq -e '.diagnosis.detail | test("1/sqrt\\(E\\), E = 6") and test("1/sqrt\\(P\\), P = 3")' "$W/out" >/dev/null ||
    fail "wrong_scale does not name both scales: $(jq .diagnosis.detail "$W/out")"

# docs/check.md's worked example (Bloem's scale): its report lines are what check prints (stage lines
# up to their numbers, which float32 rounding owns; the verdict lines exactly).
cp -r "$CASES/bloem_wrong_scale/stages" "$W/mine"
(cd "$W" && ln -s "$SRC/data" data && "$A" check mine/ "${bloem[@]}" > "$W/readme_out") || [ $? = 1 ] || fail "README example"
shown=$(awk '/^attntrace check mine\//{f=1; next} f && /^```$/{n++; if (n == 3) exit; next} f && n == 2' docs/check.md)
[ -n "$shown" ] || fail "no worked example of check in docs/check.md"
while IFS= read -r line; do
    case "$line" in
        *...*) ;;
        "  "*) grep -qF -- "${line:0:32}" "$W/readme_out" || fail "docs/check.md shows '$line'" ;;
        *) grep -qxF -- "$line" "$W/readme_out" || fail "docs/check.md shows '$line'; check prints: $(tail -2 "$W/readme_out")" ;;
    esac
done <<< "$shown"

# max_abs, max_rel and where against numpy, with the reference from mha --dtype f64.
read -r -a args < "$CASES/unknown_factor/args"
"$A" mha "${args[@]}" --dtype f64 --trace none -o "$W/ref_out.npy"
run 1 "$A" check "$CASES/unknown_factor/stages" "${args[@]}" --format json
"$PYTHON" - "$CASES/unknown_factor/stages/output.npy" "$W/ref_out.npy" "$W/out" <<'PY' || fail "output's errors differ from numpy's"
import json, sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
s = next(s for s in json.load(open(sys.argv[3]))["stages"] if s["name"] == "output")
d = np.abs(a - b)
assert s["status"] == "differs", s
assert list(np.unravel_index(np.argmax(d), d.shape)) == s["where"], (s["where"], np.argmax(d))
assert abs(s["max_abs"] - d.max()) <= 1e-12 * d.max(), (s["max_abs"], d.max())
assert abs(s["max_rel"] - (d / np.abs(b)).max()) <= 1e-9 * (d / np.abs(b)).max(), s["max_rel"]
PY

# --rtol/--atol replace the dtype's default: a correct float32 run fails compare's float64 tolerance.
ok=(check "$CASES/correct_bloem_f32/stages" "${bloem[@]}")
run 0 "$A" "${ok[@]}"
run 1 "$A" "${ok[@]}" --rtol 1e-5 --atol 1e-8
run 1 "$A" "${ok[@]}" --rtol 0 --atol 0
run 0 "$A" "${ok[@]}" --rtol 0 --atol 1e-3
grep -q "rtol 0, atol 0.001" "$W/out" || fail "the tolerance used is not reported"
usage_error "$A" "${ok[@]}" --rtol -1

# A stage of the wrong shape: "shape mismatch", the first divergence, exit 1.
mkdir -p "$W/shape"
"$PYTHON" -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros((2, 10, 5)))' "$W/shape/q.npy"
run 1 "$A" check "$W/shape" "${bloem[@]}" --format json
[ "$(jq -r '.stages[] | select(.name == "q") | .status' "$W/out")" = "shape mismatch" ] || fail "shape mismatch status"
[ "$(jq -r .first_divergence "$W/out")" = q ] || fail "shape mismatch is not the first divergence"
[ "$(jq -r .diagnosis.code "$W/out")" = unknown ] || fail "shape mismatch diagnosis"

# Errors: no stage file (3), no --heads without --sdpa (2), sdpa without -k (2), two files for one stage (3).
mkdir -p "$W/empty"
touch "$W/empty/notes.txt"
run 3 "$A" check "$W/empty" "${bloem[@]}"
error_line "no stage file" "q_heads"
run 3 "$A" check "$W/none" "${bloem[@]}"
error_line "not a directory"
usage_error "$A" check "$CASES/correct_bloem_f32/stages" -q data/bloem/x.npy
error_line "--heads"
usage_error "$A" check "$CASES/missing_scale/stages" --sdpa -q data/bloem/x.npy
usage_error "$A" check "$CASES/missing_scale/stages" --sdpa -q data/bloem/x.npy -k data/bloem/x.npy -v data/bloem/x.npy --heads 2
mkdir -p "$W/two"
cp "$CASES/correct_bloem_f32/stages/output.npy" "$W/two/output.npy"
"$A" convert "$W/two/output.npy" "$W/two/output.json"
run 3 "$A" check "$W/two" "${bloem[@]}"
error_line "two files"
echo "check: $checked cases and the error paths pass"
