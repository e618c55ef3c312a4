#!/usr/bin/env bash
# attntrace run as a hostile or unlucky user would (issues 9 and 16): outputs that alias inputs or
# each other, writes that fail or are killed half way, two writers at once, streams that never
# end, corrupt and huge-claim files, non-finite values, odd file names. Every case must end with
# the documented exit code and one clear line, no crash, and no partial, stray or clobbered file.
# docs/reliability.md lists these families with their counts (printed at the end).
source "$(dirname "$0")/cli_common.bash"
need_numpy
: "${WRITE_FAULTS:?set WRITE_FAULTS to the write_faults LD_PRELOAD shim (tests/support)}"
[ -f "$WRITE_FAULTS" ] || fail "no write_faults shim at $WRITE_FAULTS (build the write_faults target)"

declare -A cases=()
family=""
begin() { family=$1; cases[$family]=$((${cases[$family]:-0} + 1)); }

# same FILE COPY: FILE is byte for byte COPY (an input or old output kept as it was)
same() { cmp -s "$1" "$2" || fail "$1 was changed"; }
# only_entries DIR NAME...: DIR holds exactly these entries (no temp file left behind)
only_entries() {
    local dir=$1 got want
    shift
    got=$(cd "$dir" && ls -A | sort | tr '\n' ' ')
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "$dir holds [$got], expected [$want]"
}

cd "$W"
"$A" random --shape 2,5,4 --seed 1 -o x.npy
"$A" random --shape 2,5,4 --seed 2 -o y.npy
mkdir pd
"$A" random --shape 12,4 --seed 3 -o pd/in_proj_weight.npy
"$A" random --shape 4,4 --seed 4 -o pd/out_proj.weight.npy
cp -r pd pd.orig
cp x.npy x.orig
MHA=("$A" mha -q x.npy --heads 2 --trace none)

# ---- outputs that alias inputs: exit 4, the input untouched --------------------------------------
for out in pd/in_proj_weight.npy ./pd/../pd/out_proj.weight.npy; do
    begin "an output that is an input"
    run 4 "${MHA[@]}" --params pd -o "$out"
    error_line "$out: refusing to overwrite an input file"
    begin "an output that is an input"
    run 4 "${MHA[@]}" --params pd --save-params "$out"
    error_line "$out: refusing to overwrite an input file"
done
ln pd/in_proj_weight.npy hard.npy
ln -s pd/in_proj_weight.npy soft.npy
for out in hard.npy soft.npy; do
    begin "an output that is an input"
    run 4 "${MHA[@]}" --params pd --attn-weights "$out"
    error_line "$out: refusing to overwrite an input file"
done
begin "an output that is an input"
run 4 "${MHA[@]}" --params pd --dump q=x.npy
error_line "x.npy: refusing to overwrite an input file"
begin "an output that is an input"
run 4 "$A" convert x.npy ./x.npy
error_line "refusing to overwrite an input file"
begin "an output that is an input"  # stdin redirected from the output
run 4 "$A" convert - x.npy <x.npy
error_line "x.npy: refusing to overwrite an input file (-)"
same pd/in_proj_weight.npy pd.orig/in_proj_weight.npy
same pd/out_proj.weight.npy pd.orig/out_proj.weight.npy
same x.npy x.orig
run 0 "${MHA[@]}" --params pd -o ok.npy  # the parameters still load
rm -f hard.npy soft.npy ok.npy

# ---- two tensors sent to one file: exit 2 naming both flags, nothing written -----------------------
two_outputs() {  # FLAG_A FLAG_B ARGS...: the run is refused, naming both flags
    local a=$1 b=$2
    shift 2
    begin "two outputs in one file"
    run 2 "${MHA[@]}" "$@"
    error_line "$a" "$b" "two tensors cannot go to one file"
}
two_outputs "-o" "--attn-weights" -o out.npy --attn-weights out.npy
two_outputs "-o" "--attn-weights" -o out.npy --attn-weights ./out.npy
two_outputs "--dump scores" "--dump weights" --dump scores=f.npy --dump weights=f.npy
two_outputs "-o" "--save-params" -o p.bin --save-params "$W/p.bin"
[ ! -e out.npy ] && [ ! -e f.npy ] && [ ! -e p.bin ] || fail "a refused run wrote a file"
"$A" random --shape 1 -o old.npy
cp old.npy old.orig
ln old.npy old_hard.npy
ln -s old.npy old_soft.npy
two_outputs "-o" "--dump output" -o old.npy --dump output=old_hard.npy
two_outputs "--attn-weights" "--dump weights" --attn-weights old_soft.npy --dump weights=old.npy
same old.npy old.orig
begin "two outputs in one file"  # /dev/null takes any number of tensors
run 0 "${MHA[@]}" -o /dev/null --attn-weights /dev/null
rm -f old_hard.npy old_soft.npy

# ---- writes that fail: exit 4 and one line, the old file kept, no temp file ------------------------
mkdir wd
"$A" random --shape 1 --seed 9 -o wd/t.npy
cp wd/t.npy t.orig
for no_tmpfile in "" 1; do  # with O_TMPFILE, and with the named temp file it falls back to
    begin "a write that fails"
    got=0
    (ulimit -f 8; FAULT_NO_TMPFILE=$no_tmpfile LD_PRELOAD=$WRITE_FAULTS "$A" random --shape 100000 -o wd/t.npy) \
        >out 2>err || got=$?
    [ "$got" = 4 ] || fail "ulimit -f: exit $got, expected 4"
    error_line "wd/t.npy: File too large"
    same wd/t.npy t.orig
    only_entries wd t.npy
    # the logits are written block by block as the head computes them: the same error, no file left
    begin "a write that fails"
    got=0
    (ulimit -f 8; FAULT_NO_TMPFILE=$no_tmpfile LD_PRELOAD=$WRITE_FAULTS "$A" model "$FIXTURES/models/full_gpt2" \
        --ids "$FIXTURES/models/full_gpt2/ids.npy" --logits wd/t.npy) >out 2>err || got=$?
    [ "$got" = 4 ] || fail "ulimit -f, model --logits: exit $got, expected 4"
    error_line "wd/t.npy: File too large"
    same wd/t.npy t.orig
    only_entries wd t.npy
done
for out in /dev/full; do
    begin "a write that fails"
    run 4 "$A" convert x.npy "$out" --to npy
    error_line "$out"
    begin "a write that fails"
    run 4 "${MHA[@]}" -o "$out"
    error_line "$out"
done
begin "a write that fails"
run 4 "$A" random --shape 3 -o missing/dir/r.npy
error_line "missing/dir/r.npy: No such file or directory"
begin "a write that fails"  # a file system mounted read-only (/proc takes no new files)
run 4 "$A" random --shape 3 -o /proc/attntrace.npy
error_line "/proc/attntrace.npy"
if [ "$(id -u)" != 0 ]; then  # root writes into a read-only directory anyway
    begin "a write that fails"
    mkdir ro && chmod 555 ro
    run 4 "$A" random --shape 3 -o ro/r.npy
    error_line "ro/r.npy: Permission denied"
fi
for cmd in "compare x.npy x.npy" "compare x.npy y.npy" "info x.npy" "random --shape 3 -o -"; do
    begin "a write that fails"  # a full stdout is reported, whatever the command's own exit code
    got=0
    # shellcheck disable=SC2086
    "$A" $cmd >/dev/full 2>err || got=$?
    [ "$got" = 4 ] || fail "$cmd > /dev/full: exit $got, expected 4"
    error_line
done

# ---- kill -9 in the middle of a write: the old file whole, nothing left beside it --------------
if "$PYTHON" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY))' wd 2>/dev/null; then
    for kill_after in 100 300000; do
        begin "kill -9 in the middle of a write"
        got=0
        { FAULT_KILL_AFTER=$kill_after LD_PRELOAD=$WRITE_FAULTS "$A" random --shape 200000 -o wd/t.npy >out 2>err; } 2>/dev/null ||
            got=$?
        [ "$got" = 137 ] || fail "the shim did not kill the write (exit $got)"
        same wd/t.npy t.orig
        only_entries wd t.npy
    done
    begin "kill -9 in the middle of a write"  # a new file: nothing at all appears
    got=0
    { FAULT_KILL_AFTER=1000 LD_PRELOAD=$WRITE_FAULTS "$A" random --shape 200000 -o wd/new.npy >out 2>err; } 2>/dev/null || got=$?
    [ "$got" = 137 ] || fail "the shim did not kill the write (exit $got)"
    only_entries wd t.npy
else
    echo "note: $W has no O_TMPFILE: kill -9 cases skipped"
fi

# ---- two processes writing one output: always one whole file, no temp file ----------------------
"$A" random --shape 300,300 --seed 1 -o a.npy
"$A" random --shape 300,300 --seed 2 -o b.npy
mkdir race
for round in 1 2 3 4 5; do
    begin "two writers at once"
    [ "$round" -le 2 ] || cp a.npy race/r.npy  # first into a new file, then over an existing one
    "$A" convert a.npy race/r.npy & "$A" convert b.npy race/r.npy & wait
    cmp -s race/r.npy a.npy || cmp -s race/r.npy b.npy || fail "round $round: race/r.npy is neither whole file"
    only_entries race r.npy
    rm race/r.npy
done

# ---- odd file names ------------------------------------------------------------------------------
long=$(printf 'n%.0s' $(seq 1 246)).npy  # 250 bytes: legal, but too long for a ".NAME.tmp-XXXXXX"
for no_tmpfile in "" 1; do
    for round in new existing; do
        begin "odd file names"
        FAULT_NO_TMPFILE=$no_tmpfile LD_PRELOAD=$WRITE_FAULTS run 0 "$A" convert x.npy "wd/$long"
        same "wd/$long" x.npy
        only_entries wd t.npy "$long"
    done
    rm "wd/$long"
done
for flag in -o --attn-weights --params --save-params -k --attn-mask; do
    begin "odd file names"  # an empty name (a script's unset variable) is a flag error
    run 2 "${MHA[@]}" "$flag" ''
    error_line "$flag" "empty"
done
begin "odd file names"
run 2 "$A" random --shape 2 -o ''
error_line "empty"
begin "odd file names"
run 2 "$A" convert x.npy ''
error_line "empty"
begin "odd file names"  # /dev/null is written in place, whatever its extension
run 0 "${MHA[@]}" -o /dev/null --attn-weights /dev/null
mkdir dir.json
for out in dir.json/ dir.json new.json/; do
    begin "odd file names"
    run 4 "$A" convert x.npy "$out"
    error_line "$out: is a directory"
done
odd=$(printf 'q\xff.npy')  # not UTF-8
cp x.npy "$odd"
begin "odd file names"
run 0 "$A" mha -q "$odd" --heads 2 --format json -o "$(printf 'o\xfe.npy')"
jq -e '.inputs[0].file | contains("q")' out >/dev/null || fail "the JSON trace of a non-UTF-8 name does not parse"
begin "odd file names"
run 0 "$A" info --json "$odd"

# ---- streams that never end and files that claim too much: exit 3 at once, bounded ------------------
bounded() {  # CODE TEXT CMD...: CMD under a 1 GiB address space and 60 s, exit CODE and one line with TEXT
    local want=$1 text=$2 got=0
    shift 2
    begin "endless streams and huge claims"
    (ulimit -v 1048576; timeout 60 "$@") >out 2>err || got=$?
    [ "$got" = "$want" ] || fail "exit $got, expected $want: $*"
    error_line "$text"
    grep -q "out of memory" err && fail "read until memory ran out: $*"
    return 0
}
bounded 3 "/dev/zero: not a .npy or JSON tensor" "$A" info /dev/zero
bounded 3 "/dev/urandom: " "$A" info /dev/urandom
bounded 3 "/dev/urandom: " "$A" mha -q /dev/urandom --heads 2 --trace none
bounded 3 "-: not a .npy or JSON tensor" sh -c "\"$A\" convert - out.npy < /dev/zero"
[ ! -e out.npy ] || fail "a refused convert wrote its output"
npy_head() {  # SHAPE: a .npy 1.0 float32 header for SHAPE, no data
    "$PYTHON" -c 'import sys
h = "{%r: %r, %r: False, %r: %s, }" % ("descr", "<f4", "fortran_order", "shape", sys.argv[1])
h = (h + " " * (-(10 + len(h) + 1) % 64) + "\n").encode()
sys.stdout.buffer.write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h)' "$1"
}
npy_head '(1000000000000,)' >huge_claim.npy
npy_head '(4,)' >small_claim.npy
bounded 3 "more than the physical memory" sh -c "cat huge_claim.npy /dev/zero | \"$A\" info -"
bounded 3 "trailing bytes after the data" sh -c "cat small_claim.npy /dev/zero | \"$A\" info -"
bounded 3 "-: invalid JSON at byte 4" sh -c "(printf '[1, '; cat /dev/zero) | \"$A\" info -"
bounded 3 "huge_claim.npy: truncated data" "$A" info huge_claim.npy
printf '\x93NUMPY\x02\x00\xff\xff\xff\x7f' >long_header.npy
bounded 3 "over 1 MiB" sh -c "cat long_header.npy /dev/zero | \"$A\" info -"
head -c 1000 /dev/urandom >noise.npy
bounded 3 "noise.npy: " "$A" info noise.npy
# a whole stream is still read when it holds one file, from a pipe as from a file
cat x.npy | run 0 "$A" convert - piped.npy
same piped.npy x.npy

# ---- non-finite and extreme values ---------------------------------------------------------------
# JSON tensor files hold NaN, Infinity and -Infinity as Python's json writes them: read as Python does
printf '{"shape": [2, 3], "dtype": "float32", "data": [[NaN, 1.5, -Infinity], [Infinity, -0.0, 2]]}' >nonfinite.json
# ---- a model's weights cut short while they are read in place ----------------------------------
# A float32 checkpoint run in float32 is read from its mapping (FileBytes::resident). Cut short
# by another process before a layer is read, the populating madvise fails and the size says why;
# cut short after the pages were mapped, the reads themselves raise SIGBUS, which app/main.cpp
# turns into the same line. Both: exit 3, one line naming the file, no logits file.
mkdir cutwd
for after in "" 1; do
    begin "a model file cut short under the run"
    rm -rf cut && cp -r "$FIXTURES/models/full_gpt2" cut
    got=0
    FAULT_SHRINK_ON_POPULATE=cut/model.safetensors FAULT_SHRINK_AFTER_POPULATE=$after LD_PRELOAD=$WRITE_FAULTS \
        "$A" model cut --ids cut/ids.npy --logits cutwd/logits.npy >out 2>err || got=$?
    [ "$got" = 3 ] || fail "after='$after': exit $got, expected 3"
    error_line "cut/model.safetensors: the file shrank while it was read"
    [ -z "$(ls -A cutwd)" ] || fail "after='$after': left $(ls -A cutwd)"
done

begin "non-finite and extreme values"
run 0 "$A" convert nonfinite.json nonfinite.npy
"$PYTHON" - <<'PY' || fail "NaN/Infinity read differently from Python's json"
import json, numpy as np
want = np.array(json.load(open("nonfinite.json"))["data"], dtype=np.float32)
got = np.load("nonfinite.npy")
assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape)
assert np.array_equal(got, want, equal_nan=True) and np.signbit(got[1, 1]), (got, want)
PY
begin "non-finite and extreme values"  # what attntrace writes (a masked score is -Infinity) it reads back
run 0 "${MHA[@]}" --causal --dump masked_scores=ms.json --dump masked_scores=ms.npy
run 0 "$A" convert ms.json ms_back.npy  # float32, as the file declares
run 0 "$A" compare ms_back.npy ms.npy --rtol 0 --atol 0
begin "non-finite and extreme values"
run 0 "$A" info --json ms.json
[ "$(jq .inf out)" -gt 0 ] || fail "the -Infinity of masked scores was not read as -inf"
begin "non-finite and extreme values"  # the JSON trace stays strict JSON: no NaN/Infinity tokens
"$PYTHON" -c 'import numpy as np; x = np.load("x.npy"); x[0, 1, 2] = np.nan; x[1, 0, 0] = np.inf; np.save("xnan.npy", x)'
run 0 "$A" mha -q xnan.npy --heads 2 --format json --trace values -o onan.npy
"$PYTHON" -c 'import json, sys
def refuse(token): raise ValueError(token)
json.loads(open(sys.argv[1]).read(), parse_constant=refuse)' out || fail "the JSON trace holds a non-finite token"
for bad in '[nan]' '[1NaN]' '[Infinity1]' '["a", NaN' '[+Infinity]'; do
    begin "non-finite and extreme values"  # only Python's spellings, only where a value goes
    printf '%s' "$bad" >bad.json
    run 3 "$A" info bad.json
    error_line "bad.json: "
done
begin "non-finite and extreme values"  # 1e30 in V: the output is 1e30-sized and equals PyTorch's
"$PYTHON" - <<'PY'
import numpy as np, torch
rng = np.random.default_rng(5)
q, k = rng.standard_normal((2, 4, 3), dtype=np.float32), rng.standard_normal((2, 6, 3), dtype=np.float32)
v = (rng.standard_normal((2, 6, 5)) * 1e30).astype(np.float32)
np.save("q30.npy", q); np.save("k30.npy", k); np.save("v30.npy", v)
out = torch.nn.functional.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)) \
    if hasattr(torch.nn.functional, "scaled_dot_product_attention") else \
    torch.softmax(torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / np.sqrt(3), -1) @ torch.from_numpy(v)
np.save("o30_ref.npy", out.numpy())
PY
run 0 "$A" sdpa -q q30.npy -k k30.npy -v v30.npy -o o30.npy --trace none
run 0 "$A" compare o30.npy o30_ref.npy --rtol 1e-5 --atol 1e25  # atol: 1e-5 of the values' scale

# ---- hostile GGUF files: one field of a real file changed (tests/fixtures/make_gguf_hostile.py) ---
# exit 3, one line naming the file and the problem, no logits file
mkdir gguf
"$PYTHON" "$FIXTURES/make_gguf_hostile.py" gguf > gguf/cases.tsv
while IFS=$'\t' read -r name text; do
    begin "hostile GGUF files"
    run 3 "$A" model "gguf/$name" --ids 1,2 --logits gguf/logits.npy
    error_line "gguf/$name: " "$text"
    [ ! -e gguf/logits.npy ] || fail "a refused GGUF run wrote its logits"
done < gguf/cases.tsv

total=0
for f in "${!cases[@]}"; do total=$((total + cases[$f])); done
echo "hostile: $total cases passed"
for f in "${!cases[@]}"; do echo "  ${cases[$f]}  $f"; done | sort -k2
