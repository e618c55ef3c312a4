#!/usr/bin/env bash
# attntrace model from the command line: --each-line (JSON Lines, one document per line equal to
# --format json on that line alone, a failing line's {"line", "error"} and exit 3 at the end),
# every refusal (exit 2 for the flags, 3 for the inputs, one "attntrace: error:" line), outputs
# atomic (nothing left by a run that fails, even after its tensors were streamed) and never over
# an input.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "$0")/cli_common.bash"
need_numpy
M="$FIXTURES/models"
GPT2="$M/full_gpt2"

# ---- --each-line ---------------------------------------------------------------------------------
printf 'the cat sat\n\nthe mat\r\n\xff\xfe bad\n%s\nthe cat' "$(printf 'the %.0s' {1..20})" > "$W/lines.txt"
run 3 "$A" model "$GPT2" --each-line "$W/lines.txt" --top 2
error_line "lines.txt" "2 of the lines failed"
cp "$W/out" "$W/lines.jsonl"
"$A" model "$GPT2" --text "the cat sat" --format json --top 2 > "$W/one.json"
"$A" model "$GPT2" --text "the mat" --format json --top 2 > "$W/three.json"
"$A" model "$GPT2" --text "the cat" --format json --top 2 > "$W/six.json"
"$PYTHON" - "$W/lines.jsonl" "$W/one.json" "$W/three.json" "$W/six.json" <<'PY' || fail "--each-line documents"
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
alone = [json.load(open(p)) for p in sys.argv[2:]]
assert len(docs) == 5, len(docs)                      # the empty line 2 is skipped
assert docs[0] == alone[0] and docs[1] == alone[1] and docs[4] == alone[2], "a line's document differs"
assert docs[2]["line"] == 4 and "invalid UTF-8" in docs[2]["error"] and set(docs[2]) == {"line", "error"}, docs[2]
assert docs[3]["line"] == 5 and "positions allow at most 16" in docs[3]["error"], docs[3]
assert all(d["outputs"] == {"hidden_states": None, "attentions": None, "logits": None} for d in docs if "tokens" in d)
PY
printf 'the cat sat\nthe mat\n' | "$A" model "$GPT2" --each-line - --top 2 > "$W/stdin.jsonl" || fail "--each-line - exit $?"
[ "$(wc -l < "$W/stdin.jsonl")" = 2 ] || fail "--each-line -: not 2 documents"
head -1 "$W/stdin.jsonl" | "$PYTHON" -c 'import json, sys; assert json.load(sys.stdin) == json.load(open(sys.argv[1]))' "$W/one.json" ||
    fail "--each-line - differs from --text"

# ---- refusals: the flags (exit 2) ----------------------------------------------------------------
# (the pictures, issue 28, and their refusals: tests/e2e/model_pictures.sh)
usage_error "$A" model "$GPT2"; error_line "exactly one of --text"
usage_error "$A" model "$GPT2" --text x --ids 1,2; error_line "exactly one of --text"
usage_error "$A" model "$GPT2" --each-line "$W/lines.txt" --logits "$W/l.npy"; error_line "--logits" "--each-line"
usage_error "$A" model "$GPT2" --each-line "$W/lines.txt" --attentions "$W/a.npy"; error_line "--attentions"
usage_error "$A" model "$GPT2" --ids 1,x,3; error_line "--ids" "1,x,3"
usage_error "$A" model "$GPT2" --ids 1 --layers 3; error_line "--layers" "layer 3 does not exist" "0 to 2"
usage_error "$A" model "$GPT2" --ids 1 --layers 2-1; error_line "--layers" "backwards"
usage_error "$A" model "$GPT2" --ids 1 --layers 0,,1; error_line "--layers"
usage_error "$A" model "$M/full_bert_base" --ids 5,6 --logits "$W/l.npy"; error_line "--logits" "no masked-LM head"
usage_error "$A" model "$M/full_bert_base" --ids 5,6 --top 3; error_line "--top" "no masked-LM head"
usage_error "$A" model "$GPT2" --ids 1 --max-memory lots; error_line "--max-memory" "lots"
usage_error "$A" model "$GPT2" --ids 1 --seed -1; error_line "--seed"
usage_error "$A" model "$GPT2" --ids 1 --induction 0; error_line "--induction"
usage_error "$A" model "$GPT2" --ids 1 --dtype f16; error_line "--dtype"
usage_error "$A" model "$GPT2" --ids 1 --logits - --attentions -; error_line "only one can go to stdout"
usage_error "$A" model "$GPT2" --ids 1 --logits - --format json; error_line "JSON trace takes stdout"
usage_error "$A" model "$GPT2" --ids 1 --logits "$W/x.npy" --attentions "$W/./x.npy"; error_line "is the file of --attentions"

# ---- refusals: the inputs (exit 3) ---------------------------------------------------------------
run 3 "$A" model "$GPT2" --ids 5,281; error_line "--ids" "id 281" "past the vocabulary" "0 to 280"
run 3 "$A" model "$GPT2" --text ""; error_line "--text: empty text"
run 3 "$A" model "$GPT2" --ids "$(seq -s, 1 17)"; error_line "17 tokens" "at most 16"
run 3 "$A" model "$M/full_roberta" --ids "$(seq -s, 5 17)"; error_line "13 tokens" "at most 12" "padding_idx + 1 = 2"
run 0 "$A" model "$M/full_roberta" --ids "$(seq -s, 5 16),1"  # a pad token keeps position 1: 13 ids fit
"$PYTHON" -c 'import numpy; numpy.save("'"$W"'/f.npy", numpy.array([1.0, 2.0], dtype=numpy.float32))'
run 3 "$A" model "$GPT2" --ids "$W/f.npy"; error_line "f.npy" "1-D integer"
run 3 "$A" model "$GPT2" --ids "$W/missing.npy"; error_line "missing.npy"
printf '\xff' > "$W/bad.txt"
run 3 "$A" model "$GPT2" --text-file "$W/bad.txt"; error_line "bad.txt" "invalid UTF-8"
run 3 "$A" model "$GPT2" --ids 1 --max-memory 1K; error_line "--max-memory" "would need"
mkdir -p "$W/notok" && cp "$GPT2/config.json" "$GPT2/model.safetensors" "$W/notok/"
run 3 "$A" model "$W/notok" --text "the cat"; error_line "no tokenizer.json"
run 0 "$A" model "$W/notok" --ids 1,2,3                 # ids need no tokenizer
grep -q '^tokens:  0:1 ""  1:2 ""  2:3 ""$' "$W/out" || fail "tokens without a tokenizer: $(grep tokens "$W/out")"
run 0 "$A" model "$M/full_llama" --ids "$(seq -s, 1 250),$(seq -s, 1 100)" --top 1  # longer than a file name may be
# a checkpoint missing one tensor the forward needs: one line naming it, before any compute
"$PYTHON" - "$GPT2" "$W/cut" <<'PY'
import json, os, shutil, struct, sys
src, dst = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), dst)
data = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body, out, at = data[8 + n:], {"__metadata__": header.pop("__metadata__", {})}, 0
chunks = []
for name, meta in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    if name == "h.1.mlp.c_fc.weight":
        continue
    b, e = meta["data_offsets"]
    out[name] = dict(meta, data_offsets=[at, at + e - b])
    chunks.append(body[b:e])
    at += e - b
text = json.dumps(out).encode()
text += b" " * (-len(text) % 8)
open(os.path.join(dst, "model.safetensors"), "wb").write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
PY
run 3 "$A" model "$W/cut" --ids 1,2 --attentions "$W/cut.npy"; error_line "missing tensor 'h.1.mlp.c_fc.weight'" "(E, I)"
[ ! -e "$W/cut.npy" ] || fail "a refused run left --attentions behind"

# ---- outputs: atomic, never over an input --------------------------------------------------------
# The induction run fails (BOS + 2 x 10 > 16 positions) after the main run streamed its tensors.
run 3 "$A" model "$GPT2" --ids 1,2,3 --hidden-states "$W/h.npy" --attentions "$W/a.npy" --logits "$W/l.npy" --induction 10
error_line "--induction" "21 tokens"
for f in h a l; do [ ! -e "$W/$f.npy" ] || fail "a failed run left $f.npy"; done
ls -A "$W" | grep -q 'tmp' && fail "a temporary file was left: $(ls -A "$W")"
cp "$GPT2/ids.npy" "$W/ids.npy"
before=$(md5sum < "$W/ids.npy")
run 4 "$A" model "$GPT2" --ids "$W/ids.npy" --logits "$W/ids.npy"; error_line "refusing to overwrite an input"
[ "$(md5sum < "$W/ids.npy")" = "$before" ] || fail "the --ids file was overwritten"
mkdir -p "$W/copy" && cp "$GPT2"/{config.json,model.safetensors,tokenizer.json} "$W/copy/"
run 4 "$A" model "$W/copy" --ids 1 --attentions "$W/copy/model.safetensors"; error_line "refusing to overwrite an input"
cmp -s "$W/copy/model.safetensors" "$GPT2/model.safetensors" || fail "the checkpoint was overwritten"
# a tensor to stdout: the trace goes to stderr, the .npy to stdout
"$A" model "$GPT2" --ids 1,2,3 --logits - > "$W/stdout.npy" 2> "$W/trace.txt" || fail "--logits - exit $?"
"$PYTHON" -c 'import numpy, sys; assert numpy.load(sys.argv[1]).shape == (3, 281)' "$W/stdout.npy" || fail "--logits - shape"
grep -q '^model ' "$W/trace.txt" || fail "the trace did not go to stderr"
# through a pipe (held in memory, written at the end) the same values as into a file (streamed),
# hidden states too; a device that refuses the write: exit 4 naming it
"$A" model "$GPT2" --ids 1,2,3 --logits "$W/file.npy" --hidden-states "$W/hidden.npy" > /dev/null 2>&1 || fail "--logits FILE exit $?"
same_npy() {  # stdin's .npy against file $1, to within 1e-6 (the same run, another route out)
    "$PYTHON" -c 'import io, sys, numpy
a = numpy.load(io.BytesIO(sys.stdin.buffer.read())); b = numpy.load(sys.argv[1])
assert a.shape == b.shape and numpy.allclose(a, b, rtol=0, atol=1e-6), (a.shape, b.shape)' "$1"
}
"$A" model "$GPT2" --ids 1,2,3 --logits - 2> /dev/null | same_npy "$W/file.npy" || fail "--logits - through a pipe"
"$A" model "$GPT2" --ids 1,2,3 --hidden-states - 2> /dev/null | same_npy "$W/hidden.npy" || fail "--hidden-states - through a pipe"
run 4 "$A" model "$GPT2" --ids 1,2,3 --logits /dev/full; error_line "/dev/full"
echo "model cli: ok"
