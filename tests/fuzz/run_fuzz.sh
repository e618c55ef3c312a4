#!/usr/bin/env bash
# Fuzzes parse_tensor (.npy and JSON) with libFuzzer + ASan + UBSan for SECONDS (default 600).
#
#   tests/fuzz/run_fuzz.sh [SECONDS]
#
# Configures its own clang build directory (FUZZ_BUILD_DIR, default build-fuzz in the checkout),
# builds fuzz_tensor, seeds the corpus with every .npy and .json file under tests/fixtures, runs
# the fuzzer and prints how many inputs it executed. Exit status: 0 when nothing was found; else
# the fuzzer's, with the crashing input saved under $FUZZ_BUILD_DIR/artifacts/.
set -euo pipefail

seconds=${1:-600}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
jobs=${JOBS:-2}

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNTRACE_FUZZ=ON \
    -DATTNTRACE_TESTS=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target fuzz_tensor -j"$jobs"

corpus=$build/corpus
mkdir -p "$corpus" "$build/artifacts"
seeds=0
while IFS= read -r -d '' file; do
    cp "$file" "$corpus/seed_$(echo "${file#"$src"/tests/fixtures/}" | tr '/' '_')"
    seeds=$((seeds + 1))
done < <(find "$src/tests/fixtures" -type f \( -name '*.npy' -o -name '*.json' -o -name '*.safetensors' \) -size -64k -print0)
echo "corpus: $seeds seed files from tests/fixtures, $(find "$corpus" -type f | wc -l) inputs in total"

log=$build/fuzz.log
status=0
# FUZZ_SEED fixes libFuzzer's random sequence (CI uses it, so its short run is repeatable).
seed_flag=()
[ -n "${FUZZ_SEED:-}" ] && seed_flag=(-seed="$FUZZ_SEED")
"$build/tests/fuzz/fuzz_tensor" "$corpus" "${seed_flag[@]}" -max_len=65536 -max_total_time="$seconds" -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/" >"$log" 2>&1 || status=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
echo "fuzz_tensor: ${runs:-?} executions in ${seconds} s (log: $log)"
if [ "$status" -ne 0 ]; then
    echo "fuzz_tensor FAILED (exit $status):" >&2
    tail -n 60 "$log" >&2
fi
exit "$status"
