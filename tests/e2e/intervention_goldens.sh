#!/usr/bin/env bash
# lens, ablate, attribute and patch on the tiny model of every family against the float64 goldens of
# tests/goldens/make_intervention_goldens.py (the definitions of docs/interventions.md computed with
# hf_model.py, hooked at the sites), in float32 and float64 (intervention_goldens.py says how close).
source "$(dirname "$0")/cli_common.bash"
need_numpy
"$PYTHON" "$(dirname "$0")/intervention_goldens.py" "$A" "$FIXTURES/models" "$W"
