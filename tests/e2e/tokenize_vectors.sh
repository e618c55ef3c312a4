#!/usr/bin/env bash
# attntrace tokenize against ids others published: llama.cpp's vocabulary tests (written with
# transformers' AutoTokenizer), on the real tokenizer.json files they go with
# (tests/fixtures/tokenizers/README.md). Every vector must give the same ids.
source "$(dirname "$0")/cli_common.bash"
"$PYTHON" "$(dirname "$0")/tokenize_vectors.py" "$A" "$FIXTURES" "$W"
