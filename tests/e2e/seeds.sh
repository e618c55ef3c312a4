#!/usr/bin/env bash
# Every `attntrace ...  # expect: NAME` line of data/README.md is run from the repository root, and
# its output and per-head weights are compared with tests/goldens/seeds/NAME_{out,weights}.npy
# (recorded by data/make_seed_examples.py from the seed notebooks' own code). Every golden must
# have a README line, so the documentation cannot drift from the tool.
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
README="$SRC/data/README.md"
GOLDEN="$SRC/tests/goldens/seeds"

compare() {  # name what actual expected
    if ! "$ATTNTRACE" compare "$3" "$4" --rtol 1e-5 --atol 1e-6 < /dev/null > "$work/compare.txt" 2>&1; then
        fail "$1" "$2 differs from tests/goldens/seeds/$(basename "$4")"
        sed 's/^/    /' "$work/compare.txt"
        return 1
    fi
}

names=()
while IFS=$'\t' read -r name command; do
    read -r -a args <<< "$command"
    names+=("$name")
    if [[ ! -f $GOLDEN/${name}_out.npy ]]; then
        fail "$name" "data/README.md names a golden that does not exist: tests/goldens/seeds/${name}_out.npy"
        continue
    fi
    rc=0
    (cd "$SRC" && "$ATTNTRACE" "${args[@]}" -o "$work/$name.out.npy" --attn-weights "$work/$name.w.npy") \
        < /dev/null > "$work/stdout" 2> "$work/stderr" || rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$name" "exit $rc: attntrace ${args[*]}"
        sed 's/^/    /' "$work/stderr"
        continue
    fi
    ok=1
    compare "$name" "output" "$work/$name.out.npy" "$GOLDEN/${name}_out.npy" || ok=0
    if [[ -f $GOLDEN/${name}_weights.npy ]]; then
        compare "$name" "attention weights" "$work/$name.w.npy" "$GOLDEN/${name}_weights.npy" || ok=0
    fi
    if [[ $ok -eq 1 ]]; then passed=$((passed + 1)); fi
done < <(readme_expectations "$README")

# Every golden is documented.
for golden in "$GOLDEN"/*_out.npy; do
    name=$(basename "$golden" _out.npy)
    if [[ " ${names[*]} " != *" $name "* ]]; then
        fail "$name" "tests/goldens/seeds/${name}_out.npy has no '# expect: $name' line in data/README.md"
    fi
done

echo "seeds: $passed passed, $failed failures"
[[ $failed -eq 0 && $passed -gt 0 ]]
