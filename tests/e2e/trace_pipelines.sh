#!/usr/bin/env bash
# The trace in real pipelines:
#   - `attntrace mha ... --format json | jq ...`;
#   - `-o - | attntrace info -`: the tensor alone on stdout (a clean .npy, byte-equal to -o FILE),
#     the trace on stderr; likewise --attn-weights - and --dump STAGE=-;
#   - --attn-weights w.json read by numpy.array(json.load(f)["data"]): (B, H, Lq, Lk), its dtype;
#   - every stage of mha and sdpa dumped to .npy and .json: the shape PyTorch gives that stage
#     (tests/goldens/make_trace_goldens.py computes them), values equal between the two formats
#     and close to PyTorch's;
#   - --dump errors: an unknown stage, a stage of the other command, no '=': exit 2, nothing written;
#   - colour and Unicode only on a terminal (a pty from util-linux `script`), never with NO_COLOR,
#     never in a pipe or a file; the terminal trace is the plain one, decorated.
source "$(dirname "$0")/cli_common.bash"
need_numpy
command -v jq > /dev/null || { echo "SKIP: jq is not installed"; exit 77; }
cd "$SRC"

BLOEM=(mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors --scale 0.4082482904638631)
D2L=(mha -q data/d2l/queries.npy -k data/d2l/keys.npy -v data/d2l/values.npy --heads 5
     --params data/d2l/params.safetensors --valid-lens 3,2)
SEED004=(mha -q data/seed004/x.npy --heads 2 --params data/seed004/params.safetensors --no-out-proj)
ATCOLD=(sdpa -q data/atcold/q2.npy -k data/atcold/k.npy -v data/atcold/v.npy --scale 0.125)
MHA_STAGES=(query key value q k v q_heads k_heads v_heads scores masked_scores weights context merged output)
SDPA_STAGES=(query key value scores masked_scores weights output)

# plain FILE: FILE is plain ASCII with no escape sequence.
plain() {
    LC_ALL=C grep -q $'\x1b' "$1" && fail "$1: colour escapes outside a terminal"
    LC_ALL=C grep -q '[^[:print:][:space:]]' "$1" && fail "$1: non-ASCII bytes outside a terminal"
    return 0
}

# ---- JSON trace through jq ------------------------------------------------------------------------
"$A" "${BLOEM[@]}" --format json | jq -r '.stages[] | "\(.name) \(.shape | map(tostring) | join("x"))"' > "$W/jq.txt"
printf '%s\n' "query 2x10x6" "key 2x10x6" "value 2x10x6" "q 2x10x6" "k 2x10x6" "v 2x10x6" "q_heads 2x2x10x3" \
    "k_heads 2x2x10x3" "v_heads 2x2x10x3" "scores 2x2x10x10" "masked_scores 2x2x10x10" "weights 2x2x10x10" \
    "context 2x2x10x3" "merged 2x10x6" "output 2x10x6" > "$W/jq.expected"
diff "$W/jq.expected" "$W/jq.txt" || fail "--format json | jq: stage names and shapes"
[ "$("$A" "${D2L[@]}" --format json | jq -c '[.head_stats[] | .top[0].key]')" = "[2,1,1,1,2]" ] ||
    fail "--format json | jq: the most-attended key of query 0 per head"
[ "$("$A" "${D2L[@]}" --format json --trace values |
     jq -c '.stages[] | select(.name == "weights") | .data[0][0][0] | map(. > 0)')" = "[true,true,true,false,false,false]" ] ||
    fail "--format json --trace values | jq: valid lens 3 leaves keys 3.. with weight 0"

# ---- -o - | attntrace info - : the tensor on stdout, the trace on stderr -------------------------
"$A" "${BLOEM[@]}" -o "$W/out_file.npy" > "$W/trace_stdout.txt"
"$A" "${BLOEM[@]}" -o - 2> "$W/trace_stderr.txt" | "$A" info - > "$W/info.txt"
grep -qF -- '-: npy 1.0, float32, shape (2, 10, 6), C order, 120 elements' "$W/info.txt" ||
    fail "-o - | attntrace info -: $(cat "$W/info.txt")"
grep -q '^wrote output' "$W/trace_stderr.txt" || fail "-o -: the trace does not say where the output went"
cmp -s <(grep -v '^wrote ' "$W/trace_stdout.txt") <(grep -v '^wrote ' "$W/trace_stderr.txt") ||
    fail "-o -: the trace on stderr is not the trace that -o FILE prints on stdout"
plain "$W/trace_stderr.txt"
# (the same --trace on both sides: keeping the weights for --trace values takes the materialized
# path instead of the tiled one, which may round the output's last bit differently)
for kind in shapes values; do
    "$A" "${BLOEM[@]}" --trace "$kind" -o "$W/out_$kind.npy" > /dev/null
    "$A" "${BLOEM[@]}" --trace "$kind" -o - > "$W/stdout.npy" 2> "$W/stderr.txt"
    cmp -s "$W/stdout.npy" "$W/out_$kind.npy" || fail "-o - --trace $kind: stdout is not the same .npy as -o FILE"
    head -1 "$W/stderr.txt" | grep -q '^mha: 2 heads, ' || fail "-o - --trace $kind: the trace is not on stderr"
    grep -q '^head statistics' "$W/stderr.txt" || fail "-o - --trace $kind: no head statistics on stderr"
done
grep -q '^tensor(\[\[\[' "$W/stderr.txt" || fail "-o - --trace values: no tensors on stderr"
"$A" "${BLOEM[@]}" --attn-weights "$W/w_file.npy" > /dev/null
"$A" "${BLOEM[@]}" --attn-weights - 2> "$W/stderr.txt" > "$W/w_stdout.npy"
cmp -s "$W/w_stdout.npy" "$W/w_file.npy" || fail "--attn-weights -: stdout is not the weights .npy"
grep -q '^head statistics' "$W/stderr.txt" || fail "--attn-weights -: the trace is not on stderr"
"$A" "${BLOEM[@]}" --dump scores=- 2> "$W/stderr.txt" | "$A" info - > "$W/info.txt"
grep -qF 'float32, shape (2, 2, 10, 10)' "$W/info.txt" || fail "--dump scores=- | info -: $(cat "$W/info.txt")"
grep -q '^scores ' "$W/stderr.txt" || fail "--dump scores=-: the trace is not on stderr"
usage_error "$A" "${BLOEM[@]}" -o - --attn-weights -
error_line "stdout"

# ---- --attn-weights w.json ---------------------------------------------------------------------
"$A" "${BLOEM[@]}" --attn-weights "$W/w.json" --trace none
"$A" "${SEED004[@]}" --attn-weights "$W/w2d.json" --trace none
"$A" "${SEED004[@]}" --attn-weights "$W/w2d.npy" --trace none
"$A" "${BLOEM[@]}" --dtype f64 --attn-weights "$W/w64.json" --trace none
"$PYTHON" - "$W" <<'PY' || fail "--attn-weights FILE.json (above)"
import json, sys
import numpy as np
w = sys.argv[1]
bad = []
for name, shape, dtype, npy in (("w.json", (2, 2, 10, 10), "float32", "w_file.npy"),
                                ("w2d.json", (2, 5, 5), "float32", "w2d.npy"),
                                ("w64.json", (2, 2, 10, 10), "float64", None)):
    with open(f"{w}/{name}") as f:
        doc = json.load(f)
    data = np.array(doc["data"])
    if sorted(doc) != ["data", "dtype", "shape"]:
        bad.append(f"{name}: keys {sorted(doc)}")
    if data.shape != shape or doc["shape"] != list(shape) or doc["dtype"] != dtype or data.dtype != np.float64:
        bad.append(f"{name}: shape {data.shape} / {doc['shape']}, dtype {doc['dtype']}; expected {shape} {dtype}")
        continue
    if not np.allclose(data.sum(-1), 1, atol=1e-6):
        bad.append(f"{name}: rows do not sum to 1")
    if npy and not np.array_equal(data.astype(np.float32), np.load(f"{w}/{npy}")):
        bad.append(f"{name}: values differ from the .npy weights")
for b in bad:
    print("   ", b)
sys.exit(1 if bad else 0)
PY

# ---- every stage to .npy and .json: PyTorch's shapes, equal values --------------------------------
dump_all() {  # NAME COMMAND ARGS...
    local name=$1 s stages
    shift
    if [[ $1 == mha ]]; then stages=("${MHA_STAGES[@]}"); else stages=("${SDPA_STAGES[@]}"); fi
    local args=()
    for s in "${stages[@]}"; do args+=(--dump "$s=$W/$name.$s.npy" --dump "$s=$W/$name.$s.json"); done
    run 0 "$A" "$@" "${args[@]}"
    grep -q "^wrote " "$W/out" || fail "$name: the trace does not say what it wrote"
    for s in "${stages[@]}"; do
        grep -qE "^wrote( |.*, )$s $W/$name\.$s\.(npy|json)(,|\$)" "$W/out" || fail "$name: the 'wrote' line does not list $s"
    done
    cp "$W/out" "$W/$name.trace.txt"
    "$PYTHON" - "$W" "$SRC" "$name" "$*" "${stages[@]}" <<'PY' || fail "$name: stage dumps (above)"
import json, sys
import numpy as np
w, src, name, command, stages = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
sys.dont_write_bytecode = True
sys.path.insert(0, f"{src}/tests/goldens")
import make_trace_goldens as ref
which, args = ref.parse("attntrace " + command)
_, torch_stages, _, _ = (ref.run_mha if which == "mha" else ref.run_sdpa)(args)
torch_stages = {s.name: s.tensor.numpy() for s in torch_stages}
bad = []
for s in stages:
    a = np.load(f"{w}/{name}.{s}.npy")
    with open(f"{w}/{name}.{s}.json") as f:
        doc = json.load(f)  # Python's json reads the -Infinity of masked scores
    j = np.array(doc["data"], dtype=np.float64)
    t = torch_stages[s]
    if a.dtype != np.float32 or doc["dtype"] != "float32":
        bad.append(f"{s}: dtype {a.dtype} / {doc['dtype']}")
    if a.shape != t.shape or j.shape != t.shape or doc["shape"] != list(t.shape):
        bad.append(f"{s}: .npy {a.shape}, .json {j.shape} / {doc['shape']}, but PyTorch's stage is {t.shape}")
        continue
    if not np.array_equal(j.astype(np.float32), a):
        bad.append(f"{s}: .json and .npy values differ")
    if not np.array_equal(np.isfinite(a), np.isfinite(t)) or not np.allclose(
            a[np.isfinite(a)], t[np.isfinite(t)], rtol=1e-5, atol=1e-6):
        bad.append(f"{s}: differs from PyTorch by {np.abs(a - t)[np.isfinite(t)].max():.3g}")
for b in bad:
    print("   ", b)
sys.exit(1 if bad else 0)
PY
}
dump_all bloem "${BLOEM[@]}"
dump_all d2l "${D2L[@]}"
dump_all seed004 "${SEED004[@]}"
dump_all atcold "${ATCOLD[@]}"

# ---- --dump errors: exit 2, one line naming the stage and listing the stages, nothing written -----
usage_error "$A" "${BLOEM[@]}" --dump bogus="$W/bogus.npy"
error_line "--dump" "'bogus'" "query, key, value, normed, q, k, v, q_heads, k_heads, v_heads, q_rotary, k_rotary, scores, masked_scores, weights, context, merged, output"
[ -s "$W/out" ] && fail "--dump bogus: something on stdout"
[ -e "$W/bogus.npy" ] && fail "--dump bogus: a file was written"
usage_error "$A" "${ATCOLD[@]}" --dump q_heads="$W/q.npy"
error_line "--dump" "'q_heads'" "query, key, value, q_rotary, k_rotary, scores, masked_scores, weights, output"
usage_error "$A" "${BLOEM[@]}" --dump weights
error_line "--dump" "STAGE=FILE"
usage_error "$A" "${BLOEM[@]}" --dump =x.npy
error_line "--dump"
usage_error "$A" "${BLOEM[@]}" --dump weights=
error_line "--dump"

# ---- colour and Unicode: a terminal only, never with NO_COLOR ----------------------------------
command -v script > /dev/null || { echo "SKIP: no util-linux script for a pty"; exit 77; }
on_tty() {  # OUT CMD: run CMD on a pty (stdin, stdout and stderr), the session's output in OUT
    local out=$1
    shift
    script -qfec "$*" /dev/null < /dev/null > "$out"
    sed -i 's/\r$//' "$out"
}
cmd="$(printf '%q ' "$A" "${SEED004[@]}")"
"$A" "${SEED004[@]}" > "$W/plain.txt"
plain "$W/plain.txt"
"$A" "${SEED004[@]}" | cat > "$W/piped.txt"
plain "$W/piped.txt"
on_tty "$W/tty.txt" "$cmd"
LC_ALL=C grep -q $'\x1b\[' "$W/tty.txt" || fail "terminal: no colour escapes"
grep -q '·' "$W/tty.txt" && grep -q 'ᵀ' "$W/tty.txt" && grep -q '×' "$W/tty.txt" && grep -q '→' "$W/tty.txt" ||
    fail "terminal: no Unicode (·, ᵀ, ×, →)"
on_tty "$W/nocolor.txt" "NO_COLOR=1 $cmd"
plain "$W/nocolor.txt"
cmp -s "$W/nocolor.txt" "$W/plain.txt" || fail "NO_COLOR=1 on a terminal: not the plain trace"
on_tty "$W/tty_pipe.txt" "$cmd | cat"
plain "$W/tty_pipe.txt"
# the trace on stderr (a terminal) while the tensor goes to a file through stdout
on_tty "$W/tty_stderr.txt" "$cmd -o - > $W/tty_out.npy"
LC_ALL=C grep -q $'\x1b\[' "$W/tty_stderr.txt" || fail "-o - with stderr on a terminal: no colour on stderr"
"$A" info "$W/tty_out.npy" > /dev/null || fail "-o - with stderr on a terminal: stdout is not a clean .npy"
on_tty "$W/tty_stderr_nc.txt" "NO_COLOR=1 $cmd -o - > $W/tty_out2.npy"
plain "$W/tty_stderr_nc.txt"
# the terminal trace is the plain trace, decorated: the same text once escapes and Unicode are undone
"$PYTHON" - "$W/tty.txt" "$W/plain.txt" <<'PY' || fail "terminal trace differs from the plain trace beyond decoration"
import re, sys
tty = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1], encoding="utf-8").read())
for fancy, ascii_ in (("·", "@"), ("ᵀ", "^T"), ("×", "*"), ("→", "->")):
    tty = tty.replace(fancy, ascii_)
plain = open(sys.argv[2]).read()
if tty != plain:
    import difflib
    print("".join(list(difflib.unified_diff(plain.splitlines(True), tty.splitlines(True)))[:20]))
    sys.exit(1)
PY

# A stage dumped to two files (--dump scores=s.npy --dump scores=s.json) writes both, and the
# "wrote" line names both, in command-line order.
: > "$W/out"
: > "$W/err"
for s in "${MHA_STAGES[@]}"; do
    for ext in npy json; do
        [ -s "$W/bloem.$s.$ext" ] || fail "--dump $s=FILE.$ext twice: $W/bloem.$s.$ext was not written"
        grep -qF " $s $W/bloem.$s.$ext" "$W/bloem.trace.txt" ||
            fail "a stage dumped to two files: the 'wrote' line names only one ($s.$ext missing)"
    done
done

echo "trace pipelines: ok"
