#!/usr/bin/env bash
# attntrace model on every whole-model fixture (tests/fixtures/models/full_*, made by
# tests/goldens/make_model_goldens.py from hf_model.py, the float64 transcription of transformers'
# eager forward) against its goldens:
#   - hidden_states (N + 1, L, E), attentions (N, H, L, L) and logits (L, V) of --ids ids.npy, in f32
#     (rtol 1e-4, atol 1e-5 relative to the largest golden magnitude, at least 1: float32 rounding
#     of a float64 computation through 2-3 layers) and in f64 (rtol 1e-9, atol 1e-10);
#   - --layers subsets: --attentions holds exactly the kept layers' planes, in order, and
#     --hidden-states stays whole (every layer still runs);
#   - the same ids given as a comma list and as the .npy give the same bits;
#   - a run that writes no tensor runs only up to the last kept layer and says the same of them;
#   - a mixture of experts (golden/experts.npy): --experts the same ids, --expert-weights within the
#     tolerance, the JSON trace's experts per position the same ids.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
MODELS="$SRC/tests/fixtures/models"
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy"; exit 77; }

# close NAME ACTUAL EXPECTED RTOL ATOL: allclose with ATOL scaled by the expected array's largest
# magnitude (at least 1); reports the largest difference and where.
close() {
    "$PYTHON" - "$@" <<'PY' || return 1
import sys
import numpy as np
name, got, want, rtol, atol = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
if got.shape != want.shape:
    sys.exit(f"FAIL {name}: shape {got.shape}, golden {want.shape}")
scale = max(1.0, float(np.abs(want).max()))
diff = np.abs(got.astype(np.float64) - want)
if not np.allclose(got, want, rtol=rtol, atol=atol * scale):
    where = np.unravel_index(np.argmax(diff), diff.shape)
    sys.exit(f"FAIL {name}: max abs diff {diff.max():.3g} at {where} (rtol {rtol}, atol {atol} x {scale:.3g})")
PY
}

for dir in "$MODELS"/full_*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    gold="$dir/golden"
    # f32 twice: the float32 weights used where the file maps them, and copied into reused buffers
    # (ATTNTRACE_WEIGHT_PAGES, io/file_bytes.hpp); f64 converts them either way
    for run in f32/map f32/read f64/best; do
        dtype=${run%/*} pages=${run#*/}
        if [[ $dtype == f32 ]]; then rtol=1e-4 atol=1e-5; else rtol=1e-9 atol=1e-10; fi
        args=(model "$dir" --ids "$dir/ids.npy" --dtype "$dtype" --hidden-states "$work/h.npy" --attentions "$work/a.npy"
              --top 0)
        [[ -f $gold/logits.npy ]] && args+=(--logits "$work/l.npy")
        rm -f "$work"/{h,a,l}.npy
        if ! ATTNTRACE_WEIGHT_PAGES=$pages "$ATTNTRACE" "${args[@]}" < /dev/null > "$work/out" 2> "$work/err"; then
            fail "$name/$run" "exit $?: $(cat "$work/err")"
            continue
        fi
        ok=1
        close "$name/$run hidden_states" "$work/h.npy" "$gold/hidden_states.npy" $rtol $atol || ok=0
        close "$name/$run attentions" "$work/a.npy" "$gold/attentions.npy" $rtol $atol || ok=0
        [[ -f $gold/logits.npy ]] && { close "$name/$run logits" "$work/l.npy" "$gold/logits.npy" $rtol $atol || ok=0; }
        [[ $ok == 1 ]] && passed=$((passed + 1)) || failed=$((failed + 1))
    done

    # a mixture of experts: --experts equal to the golden routing, --expert-weights close, and the
    # JSON trace's "experts" of each layer the same ids
    if [[ -f $gold/experts.npy ]]; then
        for dtype in f32 f64; do
            if [[ $dtype == f32 ]]; then rtol=1e-4 atol=1e-5; else rtol=1e-9 atol=1e-10; fi
            rm -f "$work"/{e,ew}.npy
            if "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --dtype $dtype --experts "$work/e.npy" \
                --expert-weights "$work/ew.npy" --top 0 --format json < /dev/null > "$work/trace.json" 2> "$work/err" &&
                close "$name/$dtype experts" "$work/e.npy" "$gold/experts.npy" 0 0 &&
                close "$name/$dtype expert_weights" "$work/ew.npy" "$gold/expert_weights.npy" $rtol $atol &&
                "$PYTHON" - "$work/trace.json" "$gold/experts.npy" "$work/e.npy" <<'PY'
import json, sys
import numpy as np
trace, gold, written = json.load(open(sys.argv[1])), np.load(sys.argv[2]), np.load(sys.argv[3])
assert written.dtype == np.int64, written.dtype
moe = [l["experts"] for l in trace["layers"] if l["experts"] is not None]
assert len(moe) == len(gold), (len(moe), gold.shape)
for layer, g in zip(moe, gold):
    assert [p["ids"] for p in layer] == g.tolist(), (layer, g)
PY
            then
                passed=$((passed + 1))
            else
                fail "$name/$dtype routing" "$(cat "$work/err")"
            fi
        done
    fi

    # --layers: the last layer and the first, in the order of the model
    layers=$("$PYTHON" -c 'import numpy, sys; print(numpy.load(sys.argv[1]).shape[0])' "$gold/attentions.npy")
    last=$((layers - 1))
    rm -f "$work"/{h,a}.npy
    if "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --layers "$last,0" --attentions "$work/a.npy" \
        --hidden-states "$work/h.npy" --top 0 < /dev/null > "$work/out" 2> "$work/err"; then
        "$PYTHON" -c 'import numpy, sys; g = numpy.load(sys.argv[1]); numpy.save(sys.argv[2], g[[0, int(sys.argv[3])]])' \
            "$gold/attentions.npy" "$work/kept.npy" "$last"
        if close "$name --layers $last,0" "$work/a.npy" "$work/kept.npy" 1e-4 1e-5 &&
            close "$name --layers hidden_states" "$work/h.npy" "$gold/hidden_states.npy" 1e-4 1e-5; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    else
        fail "$name --layers" "exit $?: $(cat "$work/err")"
    fi

    # --ids as a comma list: the same bits as the .npy
    list=$("$PYTHON" -c 'import numpy, sys; print(",".join(map(str, numpy.load(sys.argv[1]))))' "$dir/ids.npy")
    "$ATTNTRACE" model "$dir" --ids "$list" --attentions "$work/b.npy" --top 0 < /dev/null > /dev/null 2>&1 &&
        "$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --attentions "$work/c.npy" --top 0 < /dev/null > /dev/null 2>&1 &&
        cmp -s "$work/b.npy" "$work/c.npy" && passed=$((passed + 1)) || fail "$name --ids list" "differs from --ids ids.npy"
done

# A run that writes no tensor stops after the last kept layer; its trace of layer 0 is the same.
dir="$MODELS/full_llama"
"$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --layers 0 --top 0 --format json > "$work/stop.json"
"$ATTNTRACE" model "$dir" --ids "$dir/ids.npy" --layers 0 --format json > "$work/full.json"
"$PYTHON" - "$work/stop.json" "$work/full.json" <<'PY' && passed=$((passed + 1)) || fail "early stop" "layer 0's heads differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [l["layer"] for l in a["layers"]] == [0] and a["layers"] == b["layers"], (a["layers"], b["layers"])
assert a["predictions"] is None and b["predictions"]["kind"] == "next", (a["predictions"], b["predictions"])
PY

# --experts on a dense model: exit 2 naming the flag; on a MoE model whose kept layers are all dense:
# (0, L, K), nothing to route
rc=0
"$ATTNTRACE" model "$MODELS/full_gpt2" --ids 1,2 --experts "$work/x.npy" < /dev/null > /dev/null 2> "$work/err" || rc=$?
[[ $rc == 2 ]] && grep -q -- "--experts: .* is not a mixture of experts (gpt2)" "$work/err" && [[ ! -e $work/x.npy ]] &&
    passed=$((passed + 1)) || fail "--experts on gpt2" "exit $rc: $(cat "$work/err")"
"$ATTNTRACE" model "$MODELS/full_qwen2_moe" --ids "$MODELS/full_qwen2_moe/ids.npy" --layers 1 --top 0 \
    --experts "$work/x.npy" < /dev/null > /dev/null 2>&1 &&
    "$PYTHON" -c 'import numpy, sys; assert numpy.load(sys.argv[1]).shape == (0, 12, 2)' "$work/x.npy" &&
    passed=$((passed + 1)) || fail "--experts on a dense layer" "not (0, 12, 2)"

# a MoE checkpoint without one expert's w2, or with a router of the wrong shape: exit 3, one line
# naming the tensor, before anything runs
for broken in missing shape; do
    rm -rf "$work/moe" && cp -r "$MODELS/full_mixtral" "$work/moe"
    "$PYTHON" - "$work/moe" "$SRC/tests/goldens" $broken <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
sys.dont_write_bytecode = True
import make_checkpoint_goldens as mcg
import torch
folder = Path(sys.argv[1])
t = {k: v.to(torch.float32) for k, v in mcg.read_checkpoint(folder).items()}
if sys.argv[3] == "missing":
    del t["model.layers.1.block_sparse_moe.experts.3.w2.weight"]
else:
    t["model.layers.0.block_sparse_moe.gate.weight"] = t["model.layers.0.block_sparse_moe.gate.weight"][:3]
mcg.write_safetensors(folder / "model.safetensors", t)
PY
    rc=0
    "$ATTNTRACE" model "$work/moe" --ids 1,2,3 < /dev/null > /dev/null 2> "$work/err" || rc=$?
    want=$([[ $broken == missing ]] && echo "experts.3.w2.weight" || echo "block_sparse_moe.gate.weight has shape")
    [[ $rc == 3 && $(wc -l < "$work/err") == 1 ]] && grep -qF "$want" "$work/err" && passed=$((passed + 1)) ||
        fail "MoE checkpoint, $broken tensor" "exit $rc: $(cat "$work/err")"
done

echo "model goldens: $passed passed, $failed failed"
[[ $failed == 0 ]]
