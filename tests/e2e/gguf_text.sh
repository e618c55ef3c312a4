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
echo "gguf --text: ok"
