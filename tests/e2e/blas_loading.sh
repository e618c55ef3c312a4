#!/usr/bin/env bash
# How attntrace loads OpenBLAS (lib/tensor/gemm.cpp): itself, on first use, single-threaded, in the
# same process. Checked with strace (skipped without it or where ptrace is not allowed):
#   - a computing command is one process: no second execve (attntrace once re-executed itself to
#     set OPENBLAS_NUM_THREADS and OPENBLAS_CORETYPE, paying a second start-up);
#   - with --threads 1 no thread is started at all: OpenBLAS started no pool of its own;
#   - a command that multiplies nothing (info) never opens libopenblas;
#   - the font engine (cairo, pango, fontconfig, freetype, harfbuzz) and zlib are opened only by a
#     run that writes a picture file.
# The numbers it computes this way are checked by every numeric test.
source "$(dirname "$0")/cli_common.bash"
command -v strace > /dev/null || { echo "SKIP: no strace"; exit 77; }
strace -f -qq -o /dev/null true 2> /dev/null || { echo "SKIP: strace cannot trace here (ptrace not allowed)"; exit 77; }
D=$SRC/data/atcold
sdpa=(sdpa -q "$D/q1.npy" -k "$D/k.npy" -v "$D/v.npy" --scale 0.125 --threads 1 --trace none)

run 0 strace -f -qq -e trace=execve,clone,clone3,vfork,fork -o "$W/trace.txt" "$A" "${sdpa[@]}"
[ "$(grep -c 'execve(' "$W/trace.txt")" = 1 ] || fail "sdpa ran more than one execve: $(grep execve "$W/trace.txt")"
! grep -q 'clone' "$W/trace.txt" || fail "sdpa --threads 1 started threads: $(grep clone "$W/trace.txt")"
echo "ok sdpa --threads 1: one process, no thread"

# the same run under the core type of the environment, or another the user sets: still one process
run 0 env OPENBLAS_CORETYPE=Prescott strace -f -qq -e trace=execve -o "$W/trace.txt" "$A" "${sdpa[@]}"
[ "$(grep -c 'execve(' "$W/trace.txt")" = 1 ] || fail "with OPENBLAS_CORETYPE set, sdpa ran more than one execve"
echo "ok with OPENBLAS_CORETYPE set: one process"

# Loading OpenBLAS costs milliseconds of symbol relocation: products of at most 32^3
# multiply-adds (the seed examples) run in plain loops and never load it; a larger run does.
run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "$A" info "$D/q1.npy"
! grep -q 'openblas' "$W/trace.txt" || fail "info opened OpenBLAS: $(grep openblas "$W/trace.txt")"
run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "$A" "${sdpa[@]}"
! grep -q 'openblas' "$W/trace.txt" || fail "the atcold sdpa (3-wide products) opened OpenBLAS"
run 0 "$A" random --shape 1,64,64 --seed 3 -o "$W/x.npy"
# (its projections by OpenBLAS: on a CPU with AVX-512F they run on attntrace's own kernels, weight_gemm.hpp)
run 0 env ATTNTRACE_WEIGHT_GEMM=blas strace -f -qq -e trace=openat -o "$W/trace.txt" "$A" mha -q "$W/x.npy" --heads 2 --seed 0 --threads 1 -o "$W/o.npy"
grep -q 'libopenblas.*= [0-9]' "$W/trace.txt" || fail "mha with 64x64 products did not open OpenBLAS (is this test looking at the right thing?)"
echo "ok info and the atcold sdpa never load OpenBLAS; a 64-token mha does"
# The font engine (lib/pictures/canvas.cpp: cairo + pango, and behind them fontconfig, freetype,
# harfbuzz, glib, libpng) and zlib are loaded the same way, on the first picture file written:
# linked, they would cost every start a dozen libraries. The atcold sdpa and a 64-token mha never
# open them; --plot F.png and --plot F.svg (text measured by pango) do, and --plot F.png writes a PNG.
FONT_LIBS='libcairo|libpango|libfontconfig|libfreetype|libharfbuzz|libpng|libz\.so'
! grep -qE "$FONT_LIBS" "$W/trace.txt" || fail "mha without --plot opened: $(grep -E "$FONT_LIBS" "$W/trace.txt")"
run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "$A" "${sdpa[@]}"
! grep -qE "$FONT_LIBS" "$W/trace.txt" || fail "the atcold sdpa opened: $(grep -E "$FONT_LIBS" "$W/trace.txt")"
for picture in p.png p.svg; do
    run 0 strace -f -qq -e trace=openat -o "$W/trace.txt" "$A" "${sdpa[@]}" --plot "$W/$picture"
    for lib in libpangocairo libcairo libfontconfig libfreetype libharfbuzz; do
        grep -q "$lib.*= [0-9]" "$W/trace.txt" || fail "sdpa --plot $picture did not open $lib (is this test looking at the right thing?)"
    done
done
[ "$(head -c 8 "$W/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "sdpa --plot F.png: not a PNG signature"
echo "ok only --plot loads cairo, pango, fontconfig, freetype and harfbuzz, and writes a PNG"

# mha reads its parameter file, and with a query of 1 MiB or more loads OpenBLAS, on threads beside
# the query's read (docs/performance.md), only when it may run more than one thread: --threads 1
# starts none; and only when a product may call OpenBLAS (the weight products forced to it here;
# on the AMX kernel with the fused attention nothing does, below). ATTNTRACE_TIMELINE=1 prints the
# run's phases, thread by thread, on stderr at exit.
run 0 "$A" random --shape 1,512,512 --seed 3 -o "$W/big.npy"  # 1 MiB of float32
run 0 "$A" mha -q "$W/big.npy" --heads 4 --seed 0 --threads 1 --trace none --save-params "$W/p.safetensors" -o "$W/o1.npy"
run 0 strace -f -qq -e trace=clone,clone3 -o "$W/trace.txt" "$A" mha -q "$W/big.npy" --heads 4 \
    --params "$W/p.safetensors" --threads 1 --trace none -o "$W/o2.npy"
! grep -q 'clone' "$W/trace.txt" || fail "mha --threads 1 --params started threads: $(grep clone "$W/trace.txt")"
run 0 env ATTNTRACE_TIMELINE=1 ATTNTRACE_WEIGHT_GEMM=blas "$A" mha -q "$W/big.npy" --heads 4 --params "$W/p.safetensors" \
    --threads 2 --trace none -o "$W/o3.npy"
for mark in "inputs: query read" "inputs: parameters read" "OpenBLAS: loaded" "mha: projections" "mha: attended" \
            "finish: outputs committed" "exit"; do
    grep -q "ms  thread [0-9]*  $mark\$" "$W/err" || fail "ATTNTRACE_TIMELINE=1: no '$mark' line"
done
loaded=$(grep -n 'OpenBLAS: loaded' "$W/err" | cut -d: -f1); first=$(grep -n 'mha: projections' "$W/err" | cut -d: -f1)
[ "$loaded" -lt "$first" ] || fail "OpenBLAS was not loaded before the projections began: $(cat "$W/err")"
run 0 "$A" mha -q "$W/big.npy" --heads 4 --params "$W/p.safetensors" --threads 2 --trace none -o "$W/o4.npy"
[ ! -s "$W/err" ] || fail "without ATTNTRACE_TIMELINE, mha wrote to stderr: $(head -3 "$W/err")"
# The weight products on a kernel of ours at every row count (weight_gemm_every_row: the AMX one; the
# AVX-512 one when chosen, and by default on an AMD CPU) with the fused attention: nothing calls OpenBLAS.
if "$A" --version | grep -q '^attention kernels: fused'; then
    for gemm in best avx512; do
        if [[ $gemm == best ]] && ! "$A" --version | grep -q '^weight products: amx' &&
            ! grep -q AuthenticAMD /proc/cpuinfo; then
            continue  # best leaves the largest products to OpenBLAS on this CPU
        fi
        run 0 env ATTNTRACE_TIMELINE=1 ATTNTRACE_WEIGHT_GEMM=$gemm "$A" mha -q "$W/big.npy" --heads 4 \
            --params "$W/p.safetensors" --threads 2 --trace none -o "$W/o5.npy"
        ! grep -q 'OpenBLAS: load' "$W/err" || fail "$gemm products and fused attention: OpenBLAS was loaded: $(grep OpenBLAS "$W/err")"
        run 0 "$A" compare "$W/o3.npy" "$W/o5.npy" --atol 1e-5
        echo "ok on the $gemm weight products with the fused attention, mha does not load OpenBLAS, same output"
    done
fi
run 0 "$A" compare "$W/o1.npy" "$W/o3.npy" --atol 1e-5
run 0 "$A" compare "$W/o2.npy" "$W/o3.npy" --atol 1e-5
echo "ok mha --threads 1 starts no thread; with 2, the parameters and OpenBLAS load before the first product, same output"
echo "blas loading: ok"
