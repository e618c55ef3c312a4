#!/usr/bin/env bash
# attntrace tokenize on hostile texts (whitespace runs, NEL, digits, contractions, accents, CJK,
# emoji, control bytes, added tokens inside text) against the ids Hugging Face's own code gives:
# the committed expectations always; and, where node and npm can install the reference
# (@huggingface/tokenizers and the Rust library's node addon, into the build folder, once), the
# reference is re-run here and must give the committed ids. Without them that part is skipped.
source "$(dirname "$0")/cli_common.bash"
T=$FIXTURES/tokenizers
for d in "$T"/*/; do
    [ -f "$d/tokenizer.json.xz" ] || continue
    n=$(basename "$d"); mkdir -p "$W/$n"
    xz -dc "$d/tokenizer.json.xz" > "$W/$n/tokenizer.json"
    [ -f "$d/tokenizer_config.json" ] && cp "$d/tokenizer_config.json" "$W/$n/"
done
fresh=()
REF=${TOKENIZER_REFERENCE_DIR:-$(dirname "$A")/tokenizer_reference}
if command -v node > /dev/null && command -v npm > /dev/null; then
    if [ ! -d "$REF/node_modules/@anush008/tokenizers" ]; then
        mkdir -p "$REF"
        timeout 180 npm install --prefix "$REF" --no-audit --no-fund @huggingface/tokenizers@0.2.0 @anush008/tokenizers@0.6.0 \
            > "$W/npm.log" 2>&1 || echo "note: npm could not install the reference here; the committed ids are still checked"
    fi
    if [ -d "$REF/node_modules/@anush008/tokenizers" ]; then
        NODE_PATH=$REF/node_modules node "$T/make_expected.mjs" "$W" "$W/fresh"
        fresh=("$W/fresh")
    fi
else
    echo "note: no node/npm here; the committed ids are checked, the reference is not re-run"
fi
"$PYTHON" "$(dirname "$0")/tokenize_hostile.py" "$A" "$FIXTURES" "$W" "${fresh[@]}"
