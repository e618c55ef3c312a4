#!/usr/bin/env bash
# The pictures of docs/pictures.md's "Whole models": run from the repository root after building,
#   bash docs/images/make_images.sh [build/attntrace]
# (needs chromium for the report's screenshot).
set -euo pipefail
A=${1:-build/attntrace}
I=docs/images
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# The tiny GPT-2 fixture's report on a text its byte-level tokenizer splits into bytes, layer 2
# head 3 opened.
"$A" model tests/fixtures/models/full_gpt2 --text "the café 你 😀" --report "$W/report.html" --top 3 > /dev/null
chromium --headless --no-sandbox --disable-gpu --user-data-dir="$W/profile" --virtual-time-budget=20000 \
    --screenshot="$I/model_report.png" --window-size=1300,1150 "file://$W/report.html#open=2,3" 2> /dev/null
# The stories260K checkpoint (llama2.c's 260K-parameter Llama, as a public repository holds it) on BOS and the first 23 ids run.c generated.
D=tests/fixtures/models/stories260k
ids=$(python3 -c 'import json, sys; g = json.load(open(sys.argv[1])); print(",".join(map(str, [g["bos"]] + g["greedy"][:23])))' \
    "$D/runc_greedy.json")
"$A" model "$D" --ids "$ids" --plot "$I/model_plot_stories260k.png" --top 0 > /dev/null
