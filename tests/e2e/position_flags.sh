#!/usr/bin/env bash
# The position flags without --model (--rotary, --rotary-theta, --rotary-dims, --alibi, --window,
# --causal-align) on sdpa and mha, against PyTorch float64 goldens
# (tests/fixtures/make_position_flag_fixtures.py -> tests/fixtures/position_flags/cases.json):
# output, weights, q_rotary and k_rotary in f64 (rtol 1e-9, atol 1e-10) and f32 (rtol 1e-4,
# atol 1e-5); and the flag errors (exit 2).
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (reads the JSON case list).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
DIR="$SRC/tests/fixtures/position_flags"

cases=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    e = c["expected"]
    print(c["name"], c["command"], e["output"], e["weights"], e["q_rotary"], e["k_rotary"], *c["flags"])
' "$DIR/cases.json")
while read -r name command out weights qr kr flags; do
    for dtype in f64 f32; do
        if [[ $dtype == f32 ]]; then tol=(--rtol 1e-4 --atol 1e-5); else tol=(--rtol 1e-9 --atol 1e-10); fi
        # shellcheck disable=SC2086
        if ! (cd "$DIR" && "$ATTNTRACE" "$command" $flags --dtype "$dtype" --trace none -o "$work/out.npy" \
                --attn-weights "$work/w.npy" --dump "q_rotary=$work/qr.npy" --dump "k_rotary=$work/kr.npy") \
                < /dev/null > "$work/stdout" 2> "$work/stderr"; then
            fail "$name/$dtype" "$(cat "$work/stderr")"
            continue
        fi
        ok=1
        for pair in "out.npy:$out" "w.npy:$weights" "qr.npy:$qr" "kr.npy:$kr"; do
            if ! "$ATTNTRACE" compare "$work/${pair%%:*}" "$DIR/${pair#*:}" "${tol[@]}" > "$work/cmp" 2>&1; then
                fail "$name/$dtype" "${pair#*:}: $(tail -1 "$work/cmp")"
                ok=0
            fi
        done
        [[ $ok == 1 ]] && passed=$((passed + 1))
    done
done <<< "$cases"

# Flag errors: exit 2 with one line.
expect_usage() {  # message-part args...
    local want=$1 rc=0
    shift
    (cd "$DIR" && "$ATTNTRACE" "$@") < /dev/null > /dev/null 2> "$work/stderr" || rc=$?
    if [[ $rc == 2 && $(wc -l < "$work/stderr") == 1 ]] && grep -qF -- "$want" "$work/stderr"; then
        passed=$((passed + 1))
    else
        fail "usage: $*" "exit $rc: $(cat "$work/stderr")"
    fi
}
sdpa=(sdpa -q sdpa_q.npy -k sdpa_k.npy -v sdpa_v.npy)
expect_usage "--rotary-dims" "${sdpa[@]}" --rotary half --rotary-dims 5
expect_usage "--rotary-dims" "${sdpa[@]}" --rotary-dims 4
expect_usage "--causal-align" "${sdpa[@]}" --causal --causal-align diagonal
expect_usage "--layer" mha -q mha_x.npy --heads 4 --layer 1
expect_usage "--heads" mha -q mha_x.npy

echo "position flags: $passed passed, $failed failed"
[[ $failed == 0 ]]
