#!/usr/bin/env bash
# attntrace mha / sdpa against the goldens recorded from PyTorch and the numpy reference
# (tests/goldens/make_mha_goldens.py, tests/goldens/make_gqa_goldens.py):
#   - every case of tests/goldens/{mha,gqa}/cases.json: output and per-head weights, then again with
#     --average-heads --trace none for PyTorch's averaged weights, a run that must print nothing
#     (a case whose "weights" is null runs without --attn-weights and checks the output only);
#   - every bad input of tests/goldens/mha/bad_cases.json: the exit code, one stderr line
#     "attntrace: error: ..." naming the shapes, and no output file.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (only used to read the JSON case lists).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
GOLDENS="$SRC/tests/goldens"
failed_names=()

fail() {  # name, message... (golden_common's, also remembering the failed case's name)
    local name=$1
    shift
    echo "FAIL $name: $*"
    failed=$((failed + 1))
    failed_names+=("$name")
}

tolerance() {  # dtype -> compare flags
    if [[ $1 == f64 ]]; then echo "--rtol 1e-12 --atol 1e-12"; else echo "--rtol 1e-5 --atol 1e-6"; fi
}

# compare NAME WHAT ACTUAL EXPECTED DTYPE: 0 when close, else prints why.
compare() {
    local tol
    read -r -a tol <<< "$(tolerance "$5")"
    if ! "$ATTNTRACE" compare "$3" "$4" "${tol[@]}" < /dev/null > "$work/compare.txt" 2>&1; then
        fail "$1" "$2 differs from ${4#"$GOLDENS"/}"
        sed 's/^/    /' "$work/compare.txt"
        return 1
    fi
}

# run_ok NAME DIR ARGS...: runs attntrace in DIR and expects exit 0; with --trace none among the
# arguments, also no output on stdout or stderr.
run_ok() {
    local name=$1 dir=$2
    shift 2
    local rc=0
    (cd "$dir" && "$ATTNTRACE" "$@") < /dev/null > "$work/stdout" 2> "$work/stderr" || rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$name" "exit $rc: attntrace $*"
        sed 's/^/    /' "$work/stderr"
        return 1
    fi
    if [[ " $* " == *" --trace none "* ]] && [[ -s $work/stdout || -s $work/stderr ]]; then
        fail "$name" "a run with -o and --trace none must stay quiet: attntrace $*"
        head -5 "$work/stdout" "$work/stderr" | sed 's/^/    /'
        return 1
    fi
}

# ---- golden cases ------------------------------------------------------------------------------
for list in "$GOLDENS/mha/cases.json" "$GOLDENS/gqa/cases.json"; do
    [[ -f $list ]] || { fail "$(basename "$(dirname "$list")")" "missing $list"; continue; }
    lines=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    print("|".join([c["name"], c["command"], c["dtype"], c["out"], c["weights"] or "", c["weights_avg"] or "", " ".join(c["args"])]))
' "$list")
    [[ -n $lines ]] || { fail "$list" "no cases"; continue; }
    dir=$(dirname "$list")
    while IFS='|' read -r name command dtype out weights weights_avg argline; do
        read -r -a args <<< "$argline"
        case_dir="$dir/$name"
        res="$work/$name"
        ok=1
        # a case with no weights (PyTorch's need_weights=False) runs without --attn-weights: the tiled path
        wargs=(--attn-weights "$res.w.npy")
        if [[ -z $weights ]]; then wargs=(); fi
        run_ok "$name" "$case_dir" "$command" "${args[@]}" -o "$res.out.npy" "${wargs[@]}" || continue
        compare "$name" "output" "$res.out.npy" "$case_dir/$out" "$dtype" || ok=0
        if [[ -n $weights ]]; then
            compare "$name" "per-head weights" "$res.w.npy" "$case_dir/$weights" "$dtype" || ok=0
        fi
        if [[ -n $weights_avg ]]; then
            trace=()
            if [[ " $argline " != *" --trace "* ]]; then trace=(--trace none); fi
            if run_ok "$name" "$case_dir" "$command" "${args[@]}" -o "$res.out2.npy" \
                    --attn-weights "$res.wavg.npy" --average-heads "${trace[@]}"; then
                compare "$name" "averaged weights (--average-heads)" "$res.wavg.npy" "$case_dir/$weights_avg" "$dtype" || ok=0
                compare "$name" "output with --average-heads" "$res.out2.npy" "$case_dir/$out" "$dtype" || ok=0
            else
                ok=0
            fi
        fi
        if [[ $ok -eq 1 ]]; then passed=$((passed + 1)); fi
    done <<< "$lines"
done

# ---- bad inputs ----------------------------------------------------------------------------------
bad_list="$GOLDENS/mha/bad_cases.json"
bad_lines=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    print("|".join([c["name"], " ".join(map(str, c["exit"])), "1" if c["append_output"] else "0",
                    "\x1f".join(c["stderr"]), " ".join(c["args"])]))
' "$bad_list")
while IFS='|' read -r name codes append texts argline; do
    read -r -a args <<< "$argline"
    out="$work/bad_$name.npy"
    extra=()
    if [[ $append == 1 ]]; then extra=(-o "$out"); fi
    rc=0
    (cd "$GOLDENS/mha/bad" && "$ATTNTRACE" "${args[@]}" "${extra[@]}") < /dev/null > "$work/stdout" 2> "$work/stderr" || rc=$?
    ok=1
    if [[ " $codes " != *" $rc "* ]]; then
        fail "bad/$name" "exit $rc, expected ${codes// / or }: attntrace ${args[*]}"
        sed 's/^/    /' "$work/stderr"
        continue
    fi
    nlines=$(wc -l < "$work/stderr")
    if [[ ! -s $work/stderr ]]; then
        fail "bad/$name" "no message on stderr"
        ok=0
    elif [[ $rc -ne 2 ]]; then  # CLI11's own usage messages (exit 2) may add a --help hint line
        if [[ $nlines -ne 1 ]] || ! head -1 "$work/stderr" | grep -q '^attntrace: error: '; then
            fail "bad/$name" "expected one line 'attntrace: error: ...', got:"
            sed 's/^/    /' "$work/stderr"
            ok=0
        fi
    fi
    if [[ -n $texts ]]; then
        IFS=$'\x1f' read -r -a wanted <<< "$texts"
        for text in "${wanted[@]}"; do
            if ! grep -qF -- "$text" "$work/stderr"; then
                fail "bad/$name" "the message does not name '$text':"
                sed 's/^/    /' "$work/stderr"
                ok=0
            fi
        done
    fi
    if [[ $append == 1 && -e $out ]]; then
        fail "bad/$name" "an output file was written despite the error"
        ok=0
    fi
    if [[ $ok -eq 1 ]]; then passed=$((passed + 1)); fi
done <<< "$bad_lines"

if [[ $failed -ne 0 ]]; then
    failed_cases=$(printf '%s\n' "${failed_names[@]}" | sort -u)
    echo "mha_goldens: $passed cases passed, $(wc -l <<< "$failed_cases") failed:"
    sed 's/^/  /' <<< "$failed_cases"
    exit 1
fi
echo "mha_goldens: all $passed cases passed"
