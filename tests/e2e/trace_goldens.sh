#!/usr/bin/env bash
# The text trace of every `attntrace ...  # expect: NAME` line of data/README.md, byte for byte
# against tests/goldens/traces/NAME.{values,shapes}.txt, which tests/goldens/make_trace_goldens.py
# computed in PyTorch (every stage in torch float32, printed with torch's str(); the header, notes
# and head statistics in attntrace's layout). Run from the repository root with stdout a file, so
# the trace is plain ASCII with no colour.
#
# Three checks per example:
#   1. The default `--trace shapes` and `--trace values` equal their goldens in layout byte for byte,
#      and each printed number is within float32 rounding of torch's (tests/goldens/numtext.py:
#      integers equal, floats within one unit in the last printed digit + 1e-5 * max(1, |x|)):
#      torch 1.13 here multiplies with its own kernels and attntrace with OpenBLAS, whose kernels
#      differ from one CPU (and OPENBLAS_CORETYPE) to another, so sums round differently and a
#      printed digit can flip. A failure says whether the layout differs or numbers differ beyond that.
#   2. Each stage's tensor in attntrace's `--trace values` equals torch's str() of that same stage
#      dumped with --dump STAGE=FILE.npy: the formatting alone, independent of float rounding.
#   3. The committed goldens still mean what make_trace_goldens.py computes today (--check: the
#      same comparison as 1, so torch's own rounding on this CPU does not make them "stale").
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
README="$SRC/data/README.md"
GOLDEN="$SRC/tests/goldens/traces"
"$PYTHON" -c 'import numpy, torch' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy/torch"; exit 77; }

names=()
while IFS=$'\t' read -r name command; do
    read -r -a args <<< "$command"
    names+=("$name")
    ok=1
    for kind in values shapes; do
        golden="$GOLDEN/$name.$kind.txt"
        if [[ ! -f $golden ]]; then
            fail "$name" "no golden tests/goldens/traces/$name.$kind.txt (run tests/goldens/make_trace_goldens.py)"
            ok=0
            continue
        fi
        extra=()
        [[ $kind == values ]] && extra=(--trace values)
        rc=0
        (cd "$SRC" && "$ATTNTRACE" "${args[@]}" "${extra[@]}") < /dev/null > "$work/$name.$kind.txt" \
            2> "$work/stderr" || rc=$?
        if [[ $rc -ne 0 || -s $work/stderr ]]; then
            fail "$name" "exit $rc or stderr not empty: attntrace ${args[*]} ${extra[*]}"
            sed 's/^/    /' "$work/stderr"
            ok=0
            continue
        fi
        if ! "$PYTHON" "$SRC/tests/goldens/numtext.py" "$golden" "$work/$name.$kind.txt" > "$work/why.txt"; then
            fail "$name" "--trace $kind differs from tests/goldens/traces/$name.$kind.txt: $(cat "$work/why.txt")"
            echo "    (< golden, > attntrace; a layout difference may be a LAYOUT_FIXES entry of make_trace_goldens.py)"
            diff "$golden" "$work/$name.$kind.txt" | head -20 | sed "s/^/    /" || true
            ok=0
        elif ! cmp -s "$golden" "$work/$name.$kind.txt"; then
            echo "ok $name: --trace $kind: $(cat "$work/why.txt")"
        fi
    done

    # 2. (collected here, checked below in one Python run: importing torch is the slow part)
    stages=(query key value scores masked_scores weights output)
    [[ ${args[0]} == mha ]] && stages=(query key value q k v q_heads k_heads v_heads scores masked_scores weights
                                       context merged output)
    dumps=()
    for s in "${stages[@]}"; do dumps+=(--dump "$s=$work/$name.$s.npy"); done
    if (cd "$SRC" && "$ATTNTRACE" "${args[@]}" --trace values "${dumps[@]}") < /dev/null \
        > "$work/$name.dumped.txt" 2> "$work/stderr"; then
        echo "$name ${stages[*]}" >> "$work/format_cases.txt"
    else
        fail "$name" "--dump of every stage failed"
        sed 's/^/    /' "$work/stderr"
        ok=0
    fi
    if [[ $ok -eq 1 ]]; then passed=$((passed + 1)); fi
done < <(readme_expectations "$README")

# 2. The formatting alone: each stage of attntrace's values trace against torch's str() of the
# same stage dumped to .npy.
if [[ -s $work/format_cases.txt ]]; then
    rc=0
    "$PYTHON" - "$work" > "$work/fmt.txt" <<'EOF' || rc=$?
import sys
import numpy as np
import torch
work = sys.argv[1]
failures = 0
for case in open(f"{work}/format_cases.txt").read().splitlines():
    name, *stages = case.split()
    trace = open(f"{work}/{name}.dumped.txt").read().split("\n")
    # a stage line starts with the stage's name padded to the longest name, then two spaces
    width = max(map(len, stages))
    starts = [next(i for i, l in enumerate(trace) if l.startswith(s.ljust(width) + "  (")) for s in stages]
    # the last stage's tensor ends at the "wrote ..." line (the dumps) or the head statistics
    ends = starts[1:] + [next(i for i, l in enumerate(trace)
                              if i > starts[-1] and l.startswith(("wrote ", "head statistics")))]
    for s, a, b in zip(stages, starts, ends):
        if "(same as " in trace[a]:  # an input that is the same tensor as an earlier one: not printed again
            if b != a + 1:
                failures += 1
                print(f"FAIL {name}: stage {s} is the same tensor as an earlier input but is printed again")
            continue
        printed = "\n".join(trace[a + 1:b])
        expected = str(torch.from_numpy(np.load(f"{work}/{name}.{s}.npy")))
        if printed != expected:
            failures += 1
            print(f"FAIL {name}: stage {s} is not printed as torch's str() prints the same tensor (--dump {s}):")
            print(f"  attntrace:\n{printed}\n  torch:\n{expected}")
sys.exit(min(failures, 100))
EOF
    head -60 "$work/fmt.txt"
    failed=$((failed + rc))
fi

# Every golden has its README line.
for golden in "$GOLDEN"/*.values.txt; do
    name=$(basename "$golden" .values.txt)
    if [[ " ${names[*]} " != *" $name "* ]]; then
        fail "$name" "tests/goldens/traces/$name.values.txt has no '# expect: $name' line in data/README.md"
    fi
done

# 3. The goldens are what the generator computes from the current data, to float32 rounding.
if ! "$PYTHON" "$SRC/tests/goldens/make_trace_goldens.py" --check > "$work/check.txt" 2>&1; then
    fail "goldens" "tests/goldens/traces/ is stale: run /usr/bin/python3 tests/goldens/make_trace_goldens.py"
    sed 's/^/    /' "$work/check.txt"
fi

echo "trace goldens: $passed examples passed, $failed failures"
[[ $failed -eq 0 && $passed -gt 0 ]]
