# Shared by the CLI end-to-end tests (sourced; not a test itself: ctest runs only *.sh).
# Env from ctest: ATTNTRACE (the binary), SRC (repo root), FIXTURES, PYTHON (/usr/bin/python3).
set -euo pipefail
: "${ATTNTRACE:?set ATTNTRACE to the attntrace binary}"
: "${FIXTURES:=${SRC:?set SRC or FIXTURES}/tests/fixtures}"
: "${PYTHON:=/usr/bin/python3}"
A=$ATTNTRACE
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]}:$LINENO: $BASH_COMMAND" >&2' ERR

fail() {
    echo "FAIL: $*" >&2
    for f in "$W/out" "$W/err"; do [ -s "$f" ] && { echo "--- $f" >&2; head -20 "$f" >&2; }; done
    exit 1
}

need_numpy() { "$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy"; exit 77; }; }

# run CODE CMD...: runs CMD with stdout in $W/out and stderr in $W/err, and checks its exit code.
run() {
    local want=$1 got=0
    shift
    "$@" >"$W/out" 2>"$W/err" || got=$?
    [ "$got" = "$want" ] || fail "exit $got, expected $want: $*"
}

# error_line [TEXT...]: stderr is exactly one line "attntrace: error: ..." containing each TEXT.
error_line() {
    [ "$(wc -l <"$W/err")" = 1 ] || fail "stderr is not exactly one line"
    grep -q '^attntrace: error: ' "$W/err" || fail "stderr does not start with 'attntrace: error: '"
    local t
    for t in "$@"; do grep -qF -- "$t" "$W/err" || fail "stderr does not mention '$t'"; done
}

# usage_error CMD...: exit 2 with one error line.
usage_error() { run 2 "$@"; error_line; }
