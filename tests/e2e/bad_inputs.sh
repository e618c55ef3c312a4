#!/usr/bin/env bash
# Every bad input gets exit 3 and exactly one stderr line "attntrace: error: <file>: ...": each
# fixture under npy/bad and json/bad (with the message the npy manifest promises), the JSON cases
# made here (ragged, non-numeric, truncated, 100,000 levels deep), an empty file, a directory and
# a missing path; through info, compare, convert, and stdin.
source "$(dirname "$0")/cli_common.bash"
shopt -s nullglob

# path -> the message the npy manifest promises for it (needs a python; any will do)
declare -A promised=()
if [ -f "$FIXTURES/npy/manifest.json" ]; then
    while IFS=$'\t' read -r file error; do promised["$FIXTURES/npy/$file"]=$error; done < <(
        "$PYTHON" -c 'import json, sys
for e in json.load(open(sys.argv[1])).get("bad", []): print(e["file"], e["error"], sep="\t")' \
            "$FIXTURES/npy/manifest.json")
fi

"$PYTHON" - "$W" <<'PY'
import sys
w = sys.argv[1]
cases = {
    "ragged.json": "[[1, 2, 3], [4, 5]]",
    "ragged_deep.json": "[[[1], [2]], [[3], [4, 5]]]",
    "string.json": '[1, "2", 3]',
    "null.json": "[1, null]",
    "bool.json": "[true, false]",
    "nan_lowercase.json": "[1, nan]",  # Python reads NaN, not nan
    "truncated.json": "[[1, 2], [3",
    "truncated_object.json": '{"shape": [2], "data": [1, 2]',
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "deep_unclosed.json": "[" * 100_000,
    "object_wrong_count.json": '{"shape": [2, 2], "data": [1, 2, 3]}',
    "object_bad_shape.json": '{"shape": [-1], "data": []}',
    "object_no_data.json": '{"shape": [1]}',
    "not_json.json": "hello",
    "trailing.json": "[1, 2] [3]",
}
for name, text in cases.items():
    open(f"{w}/{name}", "w").write(text)
open(f"{w}/empty.npy", "w").close()
# a valid 1.0 header for (100000, 100000) float32 and no data
header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }"
header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
open(f"{w}/claim.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
open(f"{w}/claim.json", "w").write('{"shape": [1000000000, 1000000000, 8], "data": []}')
open(f"{w}/empty.json", "w").close()
PY
mkdir "$W/a_directory"

bad=("$FIXTURES"/npy/bad/* "$FIXTURES"/json/bad/* "$W"/*.json "$W/empty.npy" "$W/a_directory" "$W/missing.npy")
n=0
magic=$(printf '\x93NUMPY')
for f in "${bad[@]}"; do
    run 3 "$A" info "$f"
    error_line "$f: "
    # the npy reader's own message, when the file reaches it (format detection needs the magic)
    if [ -n "${promised[$f]:-}" ] && [ "$(head -c 6 "$f")" = "$magic" ]; then error_line "${promised[$f]}"; fi
    if grep -qi "out of memory" "$W/err"; then fail "$f: allocated before checking"; fi
    n=$((n + 1))
done
[ "$n" -ge 20 ] || fail "only $n bad inputs found"

# the same through the other commands and stdin; a bad file never creates or changes an output
echo '[1, 2]' >"$W/good.json"
cp "$W/good.json" "$W/out.json"
for f in "$FIXTURES/npy/bad/truncated_data.npy" "$W/ragged.json" "$W/missing.npy"; do
    [ -e "$f" ] || [ "$f" = "$W/missing.npy" ] || continue
    run 3 "$A" compare "$W/good.json" "$f"
    error_line "$f: "
    run 3 "$A" convert "$f" "$W/out.json"
    error_line "$f: "
    cmp -s "$W/out.json" "$W/good.json" || fail "convert of bad $f changed the output"
    run 3 "$A" convert "$f" "$W/new.npy"
    [ ! -e "$W/new.npy" ] || fail "convert of bad $f created its output"
done
for f in "$W/ragged.json" "$W/deep.json" "$W/empty.npy" "${bad[0]}"; do
    [ -f "$f" ] || continue
    run 3 "$A" info - <"$f"
    error_line
done

# files that claim 40 GB / 8 EB must be refused from their size, not by failing to allocate
(
    ulimit -v 4000000 2>/dev/null || true
    for f in "$W/claim.npy" "$W/claim.json"; do
        run 3 "$A" info "$f"
        error_line "$f: "
        if grep -qi "out of memory" "$W/err"; then fail "$f: allocated before checking"; fi
    done
)
echo "bad_inputs: $n bad files, all exit 3 with one line: ok"
