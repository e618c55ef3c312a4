#!/usr/bin/env bash
# Threads that cannot be started never abort the run (issue 16, item 7): under `ulimit -v`, with a
# --threads far above what fits, or (as a non-root user) under `ulimit -u`, attntrace runs with the
# workers it could start and gives the --threads 1 output (within f32 rounding: the projection's
# rows are split differently). Before the fix these died by SIGABRT ("terminate called without an
# active exception", std::bad_alloc).
source "$(dirname "$0")/cli_common.bash"
need_numpy
"$PYTHON" -c "import numpy as np; np.save('$W/x.npy', np.random.default_rng(7).standard_normal((8, 512, 64)).astype(np.float32))"

run 0 "$A" mha -q "$W/x.npy" --heads 8 --seed 0 --threads 1 -o "$W/one.npy"

# limited NAME LIMIT_CMD THREADS: the run under the limit exits 0 within 120 s with the same output.
limited() {
    local name=$1 limit=$2 threads=$3 got=0
    (eval "$limit" && exec timeout 120 "$A" mha -q "$W/x.npy" --heads 8 --seed 0 --threads "$threads" \
        -o "$W/$name.npy") >"$W/out" 2>"$W/err" || got=$?
    [ "$got" = 0 ] || fail "$name: exit $got under '$limit' with --threads $threads"
    run 0 "$A" compare "$W/one.npy" "$W/$name.npy" --rtol 1e-4 --atol 1e-5
    echo "ok $name: --threads $threads under '$limit'"
}

limited as_512m_64 "ulimit -v 524288" 64
limited as_1g_1024 "ulimit -v 1048576" 1024
limited unlimited_1024 "true" 1024
if [ "$(id -u)" != 0 ]; then  # root is not held to RLIMIT_NPROC
    limited nproc_5 "ulimit -u 5" 64
fi
# Too little address space for even the calling thread's OpenBLAS buffer: OpenBLAS would retry its
# mapping forever, so the run must end, either with the output or with exit 3 and one line.
for kib in 150000 200000; do
    got=0
    (ulimit -v "$kib" && exec timeout 60 "$A" mha -q "$W/x.npy" --heads 8 --seed 0 --threads 2 -o "$W/tight.npy") \
        >"$W/out" 2>"$W/err" || got=$?
    case $got in
        0) run 0 "$A" compare "$W/one.npy" "$W/tight.npy" --rtol 1e-4 --atol 1e-5 ;;
        3) error_line "out of memory" ;;
        *) fail "ulimit -v $kib: exit $got (124: it hung), expected 0 or 3" ;;
    esac
    echo "ok ulimit -v $kib: exit $got"
done
echo "thread limits: ok"
