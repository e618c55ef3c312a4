#!/usr/bin/env bash
# --text on GGUF model files, tokenized by their own metadata as llama.cpp tokenizes them:
# `tokenize FILE.gguf` (--jsonl with and without special tokens, --decode) and `model FILE.gguf
# --text` against llama.cpp's ids, texts and logits (tests/e2e/gguf_text.py, goldens
# tests/fixtures/gguf/text_goldens.json); lens, ablate, attribute and patch take --text on a GGUF
# MODEL too, and tokenize's text and json formats name the tokens.
source "$(dirname "$0")/cli_common.bash"
need_numpy
"$PYTHON" "$(dirname "$0")/gguf_text.py" "$A" "$FIXTURES" "$W"

# The formats on a GGUF file: a control token written in the text stays text (parse_special
# false), Llama 3's BOS is added (llama-bpe), each token labelled with its vocabulary string.
run 0 "$A" tokenize "$FIXTURES/gguf/llama_q8_0/model.gguf" --text "Hi the <|im_end|>" --format json
"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tokens"][:4] == ["<|begin_of_text|>", "H", "i", "\u0120the"] and "<|im_end|>" not in d["tokens"], d
assert d["offsets"][0] == [0, 0] and d["offsets"][-1] == [16, 17], d' "$W/out" || fail "tokenize FILE.gguf --format json"
file="$FIXTURES/gguf/qwen3_q5_0/model.gguf"
run 0 "$A" tokenize "$file" --text "Hi the <|im_end|>"
[[ $(tail -n 1 "$W/out") == "13 tokens" ]] && grep -qP '^2\t260\t\x{0120}the\t the$' "$W/out" || fail "tokenize FILE.gguf (text format)"
run 0 "$A" lens "$file" --text "the cat sat" --format json
run 0 "$A" ablate "$file" --text "the cat sat" --heads 1.0,1.3
run 0 "$A" attribute "$file" --text "the cat sat" --target-id 257
run 0 "$A" patch "$file" --clean "the cat sat" --corrupt "the mat sat" --target-id 257 --versus-id 258 --site resid

# Hostile tokenizer metadata: exit 3, one line naming the file and the key.
"$PYTHON" - "$SRC/tests/goldens" "$W" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import gguf_writer as g
for name, key, value, vtype, sub in [("int_tokens", "tokenizer.ggml.tokens", [1, 2], g.ARRAY, g.INT32),
                                     ("bert", "tokenizer.ggml.model", "bert", g.STRING, None),
                                     ("short_scores", "tokenizer.ggml.scores", [0.5], g.ARRAY, g.FLOAT32)]:
    w = g.Writer("llama")
    w.add("tokenizer.ggml.model", "llama", g.STRING)
    w.add("tokenizer.ggml.tokens", ["<unk>", "a", "b"], g.ARRAY, g.STRING)
    w.add(key, value, vtype, sub)
    w.write(f"{sys.argv[2]}/{name}.gguf")
PY
run 3 "$A" tokenize "$W/int_tokens.gguf" --text "a"
error_line "$W/int_tokens.gguf: tokenizer.ggml.tokens is an array of int32"
run 3 "$A" tokenize "$W/bert.gguf" --text "a"
error_line "$W/bert.gguf: tokenizer.ggml.model \"bert\" is not supported"
run 3 "$A" tokenize "$W/short_scores.gguf" --jsonl /dev/null
error_line "$W/short_scores.gguf: tokenizer.ggml.scores: 1 scores for 3 tokens"

# A model whose tokenizer attntrace does not read (a pre-tokenizer whose regexes it lacks): --text
# is exit 3 naming it; --ids runs, the tokens shown as ids.
"$PYTHON" "$SRC/tests/goldens/gguf_writer.py" "$FIXTURES/models/full_qwen3" "$W/m.gguf" --pre gpt-4o > /dev/null
run 3 "$A" model "$W/m.gguf" --text "hi"
error_line "$W/m.gguf: tokenizer.ggml.pre \"gpt-4o\" is not supported"
run 0 "$A" model "$W/m.gguf" --ids 3,17 --top 1
grep -qF 'tokens:  0:3 ""  1:17 ""' "$W/out" || fail "model --ids on a GGUF file whose tokenizer is not read"
echo "gguf --text: ok"
