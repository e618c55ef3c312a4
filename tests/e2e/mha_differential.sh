#!/usr/bin/env bash
# Differential test: attntrace mha against PyTorch on fresh random configurations every run
# (tests/goldens/differential.py). The seed is printed; reproduce a failure with DIFF_SEED=<seed>.
# DIFF_CONFIGS=N changes the number of configurations (default 25). Skips (77) without torch.
set -euo pipefail

: "${ATTNTRACE:?set ATTNTRACE to the attntrace binary}"
SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PYTHON=${PYTHON:-/usr/bin/python3}

if ! "$PYTHON" -c 'import numpy, torch' 2> /dev/null; then
    echo "skip: $PYTHON cannot import numpy and torch (python3-torch)"
    exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seed_args=()
if [[ -n ${DIFF_SEED:-} ]]; then seed_args=(--seed "$DIFF_SEED"); fi
"$PYTHON" "$SRC/tests/goldens/differential.py" --attntrace "$ATTNTRACE" --workdir "$work" \
    --configs "${DIFF_CONFIGS:-25}" "${seed_args[@]}"
