#!/usr/bin/env bash
# Next-token argmax against an implementation nobody here wrote, on weights nobody here made:
# llama2.c's run.c (Karpathy) decoding greedily from BOS on the stories260K checkpoint found in a
# public repository (tests/fixtures/models/stories260k/runc_greedy.json says which, and how the
# 200 ids were printed; convert_llama2c.py made the Hugging Face folder from the same file). A
# Llama with GQA (8 heads, 4 kv heads), rotary from Meta's interleaved layout, SwiGLU, tied head.
# Teacher-forced: one run on BOS + run.c's first 199 ids, and the argmax of the logits at each
# position must be run.c's next id, all 200 of them (float32 on both sides).
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "$0")/cli_common.bash"
need_numpy
DIR="$FIXTURES/models/stories260k"
ids=$("$PYTHON" -c 'import json, sys; g = json.load(open(sys.argv[1])); print(",".join(map(str, [g["bos"]] + g["greedy"][:-1])))' \
    "$DIR/runc_greedy.json")
"$A" model "$DIR" --ids "$ids" --logits "$W/logits.npy" --top 1 --layers 0 > "$W/out" || fail "attntrace model exit $?"
"$PYTHON" - "$DIR/runc_greedy.json" "$W/logits.npy" <<'PY' || fail "argmax differs from llama2.c's run.c"
import json, sys
import numpy as np
want, logits = json.load(open(sys.argv[1]))["greedy"], np.load(sys.argv[2])
got = logits.argmax(-1).tolist()
first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
assert len(got) == len(want) == 200 and first is None, f"first difference at step {first}: {got[first]} vs {want[first]}"
print("stories260K: 200 of 200 greedy steps equal llama2.c's run.c")
PY
