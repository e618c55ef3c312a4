#!/usr/bin/env bash
# The unit tests and the numeric end-to-end tests once more under each of two OpenBLAS kernel
# families other than the environment's (OPENBLAS_CORETYPE: the first two of Prescott, Haswell,
# Nehalem that the environment does not already use), so a test that passes only with the kernels
# of the machine that wrote its golden fails on any machine. Setting OPENBLAS_CORETYPE is the
# point of this test; no other test sets it. Also checks that OpenBLAS runs the kernels asked for
# (else this test would prove nothing) and that attntrace keeps a core type the environment sets
# (it loads OpenBLAS itself, and replaces a generic choice only when none is set).
# Exit 77 (skipped) when this CPU cannot run one of the two kernel families (Haswell needs AVX2).
# Env from ctest: UNIT_TESTS, ATTNTRACE, SRC, FIXTURES, PYTHON.
set -uo pipefail
: "${UNIT_TESTS:?set UNIT_TESTS to the unit_tests binary}" "${ATTNTRACE:?set ATTNTRACE}" "${SRC:?set SRC}"
export PYTHON=${PYTHON:-/usr/bin/python3}
# the end-to-end tests that compare computed numbers with a reference (numpy, PyTorch, goldens)
NUMERIC_E2E=(seeds mha_goldens trace_goldens readme_examples model_goldens stories260k)

declare -A needs=([Prescott]="pni" [Haswell]="avx2 fma" [Nehalem]="sse4_2")  # /proc/cpuinfo flags
env_core=${OPENBLAS_CORETYPE:-}
cores=()
for core in Prescott Haswell Nehalem; do
    [[ ${core,,} == "${env_core,,}" ]] && continue
    [[ ${#cores[@]} -lt 2 ]] && cores+=("$core")
done
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
for core in "${cores[@]}"; do
    for flag in ${needs[$core]}; do
        if [[ $flags != *" $flag "* ]]; then
            echo "SKIP: OPENBLAS_CORETYPE=$core needs the CPU flag $flag, which this CPU lacks"
            exit 77
        fi
    done
done
echo "environment: OPENBLAS_CORETYPE=${env_core:-(unset)}; running under ${cores[*]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
result() {  # 0|1 WHAT [LOG]
    if [[ $1 -eq 0 ]]; then
        passed=$((passed + 1))
        echo "ok   $2"
    else
        failed=$((failed + 1))
        echo "FAIL $2"
        [[ -n ${3:-} ]] && tail -40 "$3" | sed 's/^/    /'
    fi
}

corename='import ctypes
blas = ctypes.CDLL("libopenblas.so.0")
blas.openblas_get_corename.restype = ctypes.c_char_p
print(blas.openblas_get_corename().decode())'
sdpa=(sdpa -q "$SRC/data/atcold/q1.npy" -k "$SRC/data/atcold/k.npy" -v "$SRC/data/atcold/v.npy" --scale 0.125)

for core in "${cores[@]}"; do
    export OPENBLAS_CORETYPE=$core
    got=$("$PYTHON" -c "$corename" 2>&1)
    [[ $got == "$core" ]]
    result $? "$core: OpenBLAS runs the $core kernels (it says: $got)"
    # attntrace loads OpenBLAS itself and keeps the core type the environment chose
    "$ATTNTRACE" --version > "$work/version.txt" 2>&1
    [[ $(sed -n 2p "$work/version.txt") == *" $core "* ]] && ! grep -q "runs .* kernels" "$work/version.txt"
    result $? "$core: attntrace runs OPENBLAS_CORETYPE=$core ($(sed -n 2p "$work/version.txt"))" "$work/version.txt"
    "$UNIT_TESTS" > "$work/unit.txt" 2>&1
    result $? "$core: unit tests ($(grep -o '[0-9]* passed' "$work/unit.txt" | head -1) test cases)" "$work/unit.txt"
    for name in "${NUMERIC_E2E[@]}"; do
        rc=0
        bash "$SRC/tests/e2e/$name.sh" > "$work/$name.txt" 2>&1 || rc=$?
        if [[ $rc -eq 77 ]]; then
            echo "skip $core: e2e $name: $(tail -1 "$work/$name.txt")"
            continue
        fi
        result $rc "$core: e2e $name" "$work/$name.txt"
    done
done
echo "blas core types ${cores[*]}: $passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
