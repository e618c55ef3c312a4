# Shared by the golden end-to-end tests (sourced; not a test itself: ctest runs only *.sh):
# the environment ctest gives (ATTNTRACE, SRC, PYTHON), a scratch directory $work removed on exit,
# the passed/failed counters with fail NAME WHY, which reports and counts but goes on, and
# readme_expectations, the README's examples that name a golden.
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

# readme_expectations README: "NAME<TAB>ARGS" for each line "attntrace ARGS  # expect: NAME" of README
# (data/README.md), in order.
readme_expectations() {
    local pattern='^attntrace (.*[^ ]) +# expect: ([A-Za-z0-9_]+)$' line
    while IFS= read -r line; do
        [[ $line =~ $pattern ]] && printf '%s\t%s\n' "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}"
    done < "$1"
    return 0
}
