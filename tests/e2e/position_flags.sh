#!/usr/bin/env bash
# The position flags without --model (--rotary, --rotary-theta, --rotary-dims, --alibi, --window,
# --causal-align) on sdpa and mha, against PyTorch float64 goldens
# (tests/fixtures/make_position_flag_fixtures.py -> tests/fixtures/position_flags/cases.json):
# output, weights and the listed stages (q_rotary, k_rotary, q_heads ...) in f64 (rtol 1e-9, atol 1e-10) and f32 (rtol 1e-4,
# atol 1e-5); a fused in_proj_weight with GQA rows; and the flag errors (exit 2).
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (reads the JSON case list).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
DIR="$SRC/tests/fixtures/position_flags"

cases=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    print(c["name"], c["command"], ",".join(k + "=" + v for k, v in c["expected"].items()), *c["flags"])
' "$DIR/cases.json")
while read -r name command expected flags; do
    IFS=, read -r -a pairs <<< "$expected"
    for dtype in f64 f32; do
        if [[ $dtype == f32 ]]; then tol=(--rtol 1e-4 --atol 1e-5); else tol=(--rtol 1e-9 --atol 1e-10); fi
        outs=()
        for pair in "${pairs[@]}"; do
            stage=${pair%%=*}
            case $stage in
                output) outs+=(-o "$work/output.npy") ;;
                weights) outs+=(--attn-weights "$work/weights.npy") ;;
                *) outs+=(--dump "$stage=$work/$stage.npy") ;;
            esac
        done
        # shellcheck disable=SC2086
        if ! (cd "$DIR" && "$ATTNTRACE" "$command" $flags --dtype "$dtype" --trace none "${outs[@]}") \
                < /dev/null > "$work/stdout" 2> "$work/stderr"; then
            fail "$name/$dtype" "$(cat "$work/stderr")"
            continue
        fi
        ok=1
        for pair in "${pairs[@]}"; do
            if ! "$ATTNTRACE" compare "$work/${pair%%=*}.npy" "$DIR/${pair#*=}" "${tol[@]}" > "$work/cmp" 2>&1; then
                fail "$name/$dtype" "${pair#*=}: $(tail -1 "$work/cmp")"
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
