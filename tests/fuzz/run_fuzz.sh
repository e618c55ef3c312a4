#!/usr/bin/env bash
# Runs every libFuzzer target (libFuzzer + ASan + UBSan) for SECONDS in all (default 600), split
# evenly between them:
#   fuzz_tensor           parse_tensor (.npy, JSON) and parse_safetensors
#   fuzz_tokenizer_json   any bytes as a tokenizer.json, then encode/decode through it
#   fuzz_tokenizer_text   any bytes as text through six real tokenizers
#   fuzz_gguf             any bytes as a GGUF header, every metadata value walked
#   fuzz_tokenizer_gguf   any bytes as text through six tokenizers of GGUF metadata (vocabulary-only
#                         .gguf files written by tests/goldens/gguf_vocab.py from the fixtures)
#
#   tests/fuzz/run_fuzz.sh [SECONDS]          FUZZ_TARGETS="fuzz_tokenizer_text" narrows the list
#
# Configures its own clang build directory (FUZZ_BUILD_DIR, default build-fuzz in the checkout),
# builds the targets, seeds each corpus from tests/fixtures (tensors: every .npy, .json and
# .safetensors under 64 KiB; tokenizer.json: the tiny component files; both text targets: the
# hostile texts, llama.cpp's vector texts and the GGUF tokenizer texts; gguf: every .gguf under 64
# KiB), runs each and prints how many inputs it executed. Exit status: 0 when nothing was found;
# else the first failing fuzzer's, with the crashing input saved under $FUZZ_BUILD_DIR/artifacts/<target>/.
set -euo pipefail

seconds=${1:-600}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
jobs=${JOBS:-2}
targets=(${FUZZ_TARGETS:-fuzz_tensor fuzz_tokenizer_json fuzz_tokenizer_text fuzz_gguf fuzz_tokenizer_gguf})
each=$((seconds / ${#targets[@]}))
[ "$each" -ge 1 ] || each=1

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNTRACE_FUZZ=ON \
    -DATTNTRACE_TESTS=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target "${targets[@]}" -j"$jobs"

fixtures=$src/tests/fixtures
# seed TARGET FILE...: copies each FILE into TARGET's corpus (named after its path in tests/fixtures)
seed() {
    local corpus=$build/corpus/$1 file
    shift
    mkdir -p "$corpus"
    for file in "$@"; do cp "$file" "$corpus/seed_$(echo "${file#"$fixtures"/}" | tr '/' '_')"; done
}

# The tokenizers fuzz_tokenizer_text reads: tokenizer.json alone (no tokenizer_config.json, so
# decode does no clean-up and GPT-2 must give the text back byte for byte).
export FUZZ_TOKENIZERS=$build/tokenizers
for name in gpt2 bert-base-uncased mistral-prepend mistral-metaspace llama3 qwen3; do
    if [ ! -s "$FUZZ_TOKENIZERS/$name/tokenizer.json" ]; then
        mkdir -p "$FUZZ_TOKENIZERS/$name"
        xz -dc "$fixtures/tokenizers/$name/tokenizer.json.xz" > "$FUZZ_TOKENIZERS/$name/tokenizer.json"
    fi
done

# The GGUF vocabularies fuzz_tokenizer_gguf reads, written from the tokenizer.json fixtures as
# convert_hf_to_gguf.py would (their digests checked against those llama.cpp tokenized).
export FUZZ_GGUF_VOCABS=$build/gguf_vocabs
for name in gpt2 llama3 qwen3 gpt-neox-20b mistral-spm mistral-hf; do
    if [ ! -s "$FUZZ_GGUF_VOCABS/$name.gguf" ]; then
        mkdir -p "$FUZZ_GGUF_VOCABS"
        /usr/bin/python3 "$src/tests/goldens/gguf_vocab.py" "$fixtures" "$name" "$FUZZ_GGUF_VOCABS/$name.gguf"
    fi
done

# text_seeds DIR: the hostile texts, the GGUF tokenizer texts and llama.cpp's vector texts, a file each
text_seeds() {
    mkdir -p "$1"
    /usr/bin/python3 - "$fixtures/tokenizers" "$1" <<'PY'
import glob, json, os, sys
src, out = sys.argv[1:3]
texts = json.load(open(os.path.join(src, "hostile", "texts.json"), encoding="utf-8"))
texts += json.load(open(os.path.join(src, "gguf", "cases.json"), encoding="utf-8"))["texts"]
for path in glob.glob(os.path.join(src, "vectors", "*.inp")):
    texts += open(path, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
for i, t in enumerate(dict.fromkeys(texts)):
    open(os.path.join(out, f"text_{i:03d}"), "wb").write(t.encode("utf-8", "surrogatepass"))
PY
}

seed_corpus() {  # TARGET: its seeds
    case $1 in
        fuzz_tensor)
            mapfile -d '' files < <(find "$fixtures" -path "$fixtures/tokenizers" -prune -o -type f \
                \( -name '*.npy' -o -name '*.json' -o -name '*.safetensors' \) -size -64k -print0)
            seed "$1" "${files[@]}" ;;
        fuzz_tokenizer_json)
            seed "$1" "$fixtures"/tokenizers/tiny/[a-z]*.json "$fixtures"/tokenizers/fuzz/json/* ;;
        fuzz_tokenizer_text | fuzz_tokenizer_gguf)
            local dir=$build/text_seeds
            text_seeds "$dir"
            seed "$1" "$dir"/* "$fixtures"/tokenizers/fuzz/text/* ;;
        fuzz_gguf)
            mapfile -d '' files < <(find "$fixtures" -type f -name '*.gguf' -size -64k -print0)
            seed "$1" "${files[@]}" ;;
    esac
}

status=0
# FUZZ_SEED fixes libFuzzer's random sequence (CI uses it, so its short run is repeatable).
seed_flag=()
[ -n "${FUZZ_SEED:-}" ] && seed_flag=(-seed="$FUZZ_SEED")
for target in "${targets[@]}"; do
    seed_corpus "$target"
    corpus=$build/corpus/$target
    echo "$target corpus: $(find "$corpus" -type f -name 'seed_*' | wc -l) seed files from tests/fixtures, $(find "$corpus" -type f | wc -l) inputs in total"
    mkdir -p "$build/artifacts/$target"
    log=$build/$target.log
    run=0
    "$build/tests/fuzz/$target" "$corpus" "${seed_flag[@]}" -max_len=65536 -max_total_time="$each" -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$target/" >"$log" 2>&1 || run=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    echo "$target: ${runs:-?} executions in ${each} s (log: $log)"
    if [ "$run" -ne 0 ]; then
        echo "$target FAILED (exit $run):" >&2
        tail -n 60 "$log" >&2
        [ "$status" -ne 0 ] || status=$run
    fi
done
exit "$status"
