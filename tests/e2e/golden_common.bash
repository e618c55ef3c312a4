# Shared by the golden end-to-end tests (sourced; not a test itself: ctest runs only *.sh):
# the environment ctest gives (ATTNTRACE, SRC, PYTHON), a scratch directory $work removed on exit,
# and the passed/failed counters with fail NAME WHY, which reports and counts but goes on.
set -euo pipefail

: "${ATTNTRACE:?set ATTNTRACE to the attntrace binary}"
SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PYTHON=${PYTHON:-/usr/bin/python3}
ATTNTRACE=$(realpath "$ATTNTRACE")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
fail() {
    echo "FAIL $1: $2"
    failed=$((failed + 1))
}
