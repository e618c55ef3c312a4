#!/usr/bin/env bash
# Packs what tests/bench/bench.py needs to run on a machine that lacks Debian's packages. The
# device machine of the tool library is one: Ubuntu, python3 with PyTorch 2.x and numpy, no
# OpenBLAS and nothing to fetch. The pack holds the built attntrace, sgemm_ceiling and
# membw_ceiling, and the OpenBLAS that attntrace loads (libopenblas.so.0 with libgfortran and
# libquadmath), about 45 MB.
#
# Usage, from the repository root, after a Release build:
#   tests/bench/device_bundle.sh [BUILD] [OUT]          (defaults: build, .device-bundle)
#   mkdir -p .git/info && echo /.device-bundle/ >> .git/info/exclude   (once: not committed)
# then on the other machine, from a copy of the repository with OUT beside it (the device tool's
# `carry`), with no other setup:
#   LD_LIBRARY_PATH=$PWD/.device-bundle/lib python3 tests/bench/bench.py \
#       --build .device-bundle/build --threads 1,2,4,8,16 --python python3 --quick --skip-long
# attntrace loads OpenBLAS by its soname, so LD_LIBRARY_PATH decides which one it gets. The pack
# runs wherever glibc is 2.36 or newer (libstdc++ is linked into attntrace; the two ceiling tools
# take the machine's own).
set -euo pipefail
build=${1:-build}
out=${2:-.device-bundle}
for exe in "$build/attntrace" "$build/tests/sgemm_ceiling" "$build/tests/membw_ceiling"; do
    [ -x "$exe" ] || { echo "device_bundle: $exe is missing: build first (cmake --build $build)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/build/tests" "$out/lib"
cp "$build/attntrace" "$out/build/"
cp "$build/tests/sgemm_ceiling" "$build/tests/membw_ceiling" "$out/build/tests/"
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
    path=$(/sbin/ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
    [ -n "$path" ] || { echo "device_bundle: $lib not found by ldconfig (apt-get install libopenblas-dev)" >&2; exit 1; }
    cp -L "$path" "$out/lib/$lib"
done
du -sh "$out" | awk '{print "device_bundle: " $2 " holds " $1}'
