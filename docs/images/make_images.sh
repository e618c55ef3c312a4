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
# The real stories260K model (data/stories260K.gguf: llama2.c's 260K-parameter TinyStories Llama and
# its 512-token vocabulary) on the first two sentences of the story it writes greedily from BOS.
M=data/stories260K.gguf
"$A" model "$M" --text "Once upon a time, there was a little girl named Lily. She loved to play outside in the park." \
    --plot "$I/model_plot_stories260k.png" --top 0 > /dev/null
# docs/interventions.md's demonstration: two stories that differ in one name, she or he next.
for site in resid head; do
    "$A" patch "$M" --clean "Once upon a time, Lily went to the park to play. One day," \
        --corrupt "Once upon a time, Tim went to the park to play. One day," --target she --versus he \
        --site "$site" --plot "$I/patch_${site}_stories260k.png" > /dev/null
done
