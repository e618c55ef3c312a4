#!/usr/bin/env bash
# The tokenizer of GGUF metadata against llama.cpp's own llama_tokenize and llama_detokenize on the
# same vocabularies (tests/fixtures/tokenizers/gguf/README.md): each case's metadata made from the
# committed tokenizer.json fixtures (tests/goldens/gguf_vocab.py, checked against the digest of the
# file llama.cpp tokenized) and written as vocabulary-only GGUF files read by Tokenizer::load (the
# gguf_tokenize driver), every text's ids with and without special tokens and the decoded text.
source "$(dirname "$0")/cli_common.bash"
need_numpy  # gguf_writer.py writes the files
[ -x "${GGUF_TOKENIZE:-}" ] || fail "GGUF_TOKENIZE (the gguf_tokenize test driver) is not set"
"$PYTHON" "$(dirname "$0")/gguf_tokenizer.py" "$GGUF_TOKENIZE" "$FIXTURES" "$W"
