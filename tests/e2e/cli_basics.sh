#!/usr/bin/env bash
# The command line itself: --version, --help, every subcommand's examples, and exit 2 with one
# "attntrace: error: " line for every kind of bad command line (never CLI11's own 100+ codes).
source "$(dirname "$0")/cli_common.bash"

version=$(sed -n 's/^project(attntrace VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
run 0 env -u ATTNTRACE_ATTENTION_KERNEL "$A" --version
[ "$(head -1 "$W/out")" = "attntrace $version" ] || fail "--version printed '$(head -1 "$W/out")'"
# the second line: the OpenBLAS it loaded, as OpenBLAS describes itself
sed -n 2p "$W/out" | grep -q '^OpenBLAS [0-9.]* .*DYNAMIC_ARCH' || fail "--version does not name OpenBLAS: '$(cat "$W/out")'"
# the third: the attention kernels (docs/performance.md), which ATTNTRACE_ATTENTION_KERNEL chooses
if grep -qw avx512f /proc/cpuinfo; then best="fused avx512"; else best="OpenBLAS products"; fi
[ "$(sed -n 3p "$W/out")" = "attention kernels: $best" ] || fail "--version's kernels: '$(sed -n 3p "$W/out")', expected '$best'"
ATTNTRACE_ATTENTION_KERNEL=blas run 0 "$A" --version
[ "$(sed -n 3p "$W/out")" = "attention kernels: OpenBLAS products" ] || fail "ATTNTRACE_ATTENTION_KERNEL=blas: '$(sed -n 3p "$W/out")'"
ATTNTRACE_ATTENTION_KERNEL=fast run 2 "$A" --version
error_line "ATTNTRACE_ATTENTION_KERNEL" "'fast' is not one of best, blas, avx512"
if [ "$best" = "OpenBLAS products" ]; then
    ATTNTRACE_ATTENTION_KERNEL=avx512 run 2 "$A" --version
    error_line "this CPU cannot run the avx512 kernels"
fi
# ATTNTRACE_WEIGHT_GEMM (tensor/weight_gemm.hpp) the same way
ATTNTRACE_WEIGHT_GEMM=fast run 2 "$A" --version
error_line "ATTNTRACE_WEIGHT_GEMM" "'fast' is not one of best, blas, avx512"
ATTNTRACE_WEIGHT_GEMM=blas run 0 "$A" --version
[ "$(sed -n 4p "$W/out")" = "weight products: OpenBLAS products" ] || fail "ATTNTRACE_WEIGHT_GEMM=blas: '$(sed -n 4p "$W/out")'"
# ATTNTRACE_WEIGHT_PAGES (io/file_bytes.hpp WeightPages) the same way
ATTNTRACE_WEIGHT_PAGES=mmap run 2 "$A" --version
error_line "ATTNTRACE_WEIGHT_PAGES" "'mmap' is not one of best, map, read"
# the fourth line: the weight products' kernel, AMX where the CPU has AMX-BF16 (and Linux grants it)
if grep -qw amx_bf16 /proc/cpuinfo; then weights="amx (float32 by bfloat16 split)"; elif grep -qw avx512f /proc/cpuinfo; then weights=avx512; else weights="OpenBLAS products"; fi
run 0 env -u ATTNTRACE_WEIGHT_GEMM "$A" --version
[ "$(sed -n 4p "$W/out")" = "weight products: $weights" ] || fail "--version's weight products: '$(sed -n 4p "$W/out")', expected '$weights'"
if ! grep -qw amx_bf16 /proc/cpuinfo; then
    ATTNTRACE_WEIGHT_GEMM=amx run 2 "$A" --version
    error_line "this CPU cannot run the amx kernels"
fi
if ! grep -qw avx512f /proc/cpuinfo; then
    ATTNTRACE_WEIGHT_GEMM=avx512 run 2 "$A" --version
    error_line "this CPU cannot run the avx512 kernels"
fi

run 0 "$A" --help
[ ! -s "$W/err" ] || fail "--help wrote to stderr"
commands=$(sed -n '/^Subcommands:/,/^$/p' "$W/out" | awk 'NR > 1 && NF { print $1 }')
for c in info convert compare random sdpa mha; do
    grep -qx "$c" <<<"$commands" || fail "--help does not list $c"
done
for c in $commands; do
    run 0 "$A" "$c" --help
    grep -q '^Examples:' "$W/out" || fail "$c --help has no Examples section"
    grep -q "^  attntrace $c" "$W/out" || fail "$c --help has no example of $c"
done

# no subcommand, an unknown one, an unknown option
usage_error "$A"
usage_error "$A" frobnicate x.npy
error_line "frobnicate: unknown command"
usage_error "$A" --frobnicate
error_line "--frobnicate"
usage_error "$A" info --frobnicate x.npy
error_line "--frobnicate"

# missing required arguments
usage_error "$A" info
error_line FILE
usage_error "$A" convert only_in.npy
error_line OUT
usage_error "$A" compare a.npy
error_line B
usage_error "$A" random -o "$W/x.npy"
error_line --shape
usage_error "$A" random --shape 2,3
error_line --output

# bad values, each naming its flag
for shape in 2,x -1 "" 2,,3 1.5 " 2" 2, 99999999999999999999 4294967296,4294967296; do
    usage_error "$A" random --shape "$shape" -o "$W/x.npy"
    error_line --shape
done
[ ! -e "$W/x.npy" ] || fail "a rejected command line wrote its output"
usage_error "$A" random --shape 2 --dist cauchy -o "$W/x.npy"
error_line --dist
usage_error "$A" random --shape 2 --dtype f16 -o "$W/x.npy"
error_line --dtype
usage_error "$A" random --shape 2 --seed abc -o "$W/x.npy"
error_line --seed
usage_error "$A" random --shape 2 --seed -1 -o "$W/x.npy"
error_line --seed
usage_error "$A" random --shape 2 -o "$W/x.txt"   # no format from the extension, no --to
error_line x.txt
"$A" random --shape 2,3 -o "$W/x.npy"
usage_error "$A" convert "$W/x.npy" -
error_line "--to: required when writing to stdout"
usage_error "$A" convert "$W/x.npy" "$W/y" --to csv
error_line --to
usage_error "$A" compare "$W/x.npy" "$W/x.npy" --rtol -1
error_line --rtol
usage_error "$A" compare "$W/x.npy" "$W/x.npy" --atol -1e-9
error_line --atol
usage_error "$A" compare "$W/x.npy" "$W/x.npy" --atol nan
error_line --atol
usage_error "$A" compare "$W/x.npy" "$W/x.npy" --rtol abc
error_line --rtol
[ ! -s "$W/out" ] || fail "a usage error printed to stdout"

# a full stdout is an output error, not a silent success
if [ -w /dev/full ]; then
    got=0
    "$A" info "$W/x.npy" >/dev/full 2>"$W/err" || got=$?
    [ "$got" = 4 ] || fail "info > /dev/full: exit $got, expected 4"
    error_line stdout
fi
echo "cli_basics: ok"
