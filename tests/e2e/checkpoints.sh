#!/usr/bin/env bash
# attntrace mha --model on tiny Hugging Face checkpoints against goldens from a float64
# transcription of transformers' eager attention (tests/goldens/make_checkpoint_goldens.py ->
# tests/fixtures/models/cases.json):
#   - every case: output, weights (B, H, L, L), and the normed / q_rotary / k_rotary stages where the
#     family has them, in f32 (rtol 1e-4, atol 1e-5: float32 rounding of a float64 computation) and
#     in f64 (rtol 1e-9, atol 1e-10); a sharded checkpoint (mistral) and bf16 / f16 weights included;
#   - every bad checkpoint of models/bad/cases.json: exit 3 and one "attntrace: error:" line;
#   - --normed on the golden normed input; an unbatched (L, E) input;
#   - --heads / --kv-heads / --scale disagreeing with config.json: exit 2; info on a checkpoint folder;
#   - the memory map: a 24-layer checkpoint over 2 GB, one layer's peak RSS within 2x that layer's
#     bytes (tests/e2e/checkpoint_memory.py).
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
MODELS="$SRC/tests/fixtures/models"
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy"; exit 77; }

# compare NAME WHAT ACTUAL EXPECTED RTOL ATOL
compare() {
    if ! "$ATTNTRACE" compare "$3" "$4" --rtol "$5" --atol "$6" < /dev/null > "$work/compare.txt" 2>&1; then
        fail "$1" "$2 differs from ${4#"$MODELS"/}"
        sed 's/^/    /' "$work/compare.txt"
        return 1
    fi
}

# ---- goldens -----------------------------------------------------------------------------------
cases=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    e = c["expected"]
    print(c["name"], c["model"], c["layer"], c["hidden"], c["key_padding_mask"] or "-",
          *[(k + "=" + e[k]) for k in ("normed", "q_rotary", "k_rotary") if e[k]],
          "weights=" + e["weights"], "output=" + e["output"])
' "$MODELS/cases.json")
while read -r name model layer hidden kpm stages; do
    for dtype in f32 f64; do
        if [[ $dtype == f32 ]]; then rtol=1e-4 atol=1e-5; else rtol=1e-9 atol=1e-10; fi
        args=(mha --model "$MODELS/$model" --layer "$layer" -q "$MODELS/$hidden" --dtype "$dtype" --trace none
              -o "$work/output.npy" --attn-weights "$work/weights.npy")
        [[ $kpm == - ]] || args+=(--key-padding-mask "$MODELS/$kpm")
        for s in $stages; do
            stage=${s%%=*}
            [[ $stage == output || $stage == weights ]] || args+=(--dump "$stage=$work/$stage.npy")
        done
        if ! "$ATTNTRACE" "${args[@]}" < /dev/null > "$work/stdout" 2> "$work/stderr"; then
            fail "$name/$dtype" "attntrace ${args[*]}"
            sed 's/^/    /' "$work/stderr"
            continue
        fi
        ok=1
        for s in $stages; do
            compare "$name/$dtype" "${s%%=*}" "$work/${s%%=*}.npy" "$MODELS/${s#*=}" "$rtol" "$atol" || ok=0
        done
        [[ $ok == 1 ]] && passed=$((passed + 1))
    done
done <<< "$cases"

# ---- bad checkpoints: exit 3, one line ------------------------------------------------------------
bad=$("$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    print(c["name"], c["model"], c["layer"], c["hidden"], c["exit"], c["error_contains"])
' "$MODELS/bad/cases.json")
while read -r name model layer hidden want contains; do
    rc=0
    "$ATTNTRACE" mha --model "$MODELS/$model" --layer "$layer" -q "$MODELS/$hidden" -o "$work/bad.npy" \
        < /dev/null > "$work/stdout" 2> "$work/stderr" || rc=$?
    if [[ $rc != "$want" ]]; then
        fail "bad/$name" "exit $rc, expected $want"
    elif [[ $(wc -l < "$work/stderr") != 1 ]] || ! grep -q '^attntrace: error: ' "$work/stderr"; then
        fail "bad/$name" "stderr is not one 'attntrace: error:' line"
    elif ! grep -qF -- "$contains" "$work/stderr"; then
        fail "bad/$name" "stderr does not mention '$contains'"
    elif [[ -e $work/bad.npy ]]; then
        fail "bad/$name" "an output file was written"
    else
        passed=$((passed + 1))
        continue
    fi
    sed 's/^/    /' "$work/stderr"
done <<< "$bad"

# ---- flags that disagree with config.json: exit 2 ----------------------------------------------
gpt2=(mha --model "$MODELS/gpt2" --layer 1 -q "$MODELS/gpt2/golden/hidden_L1.npy" --trace none -o "$work/x.npy")
for extra in "--heads 3" "--kv-heads 2" "--scale 0.5"; do
    rc=0
    # shellcheck disable=SC2086
    "$ATTNTRACE" "${gpt2[@]}" $extra < /dev/null > /dev/null 2> "$work/stderr" || rc=$?
    if [[ $rc == 2 ]] && grep -q "config.json" "$work/stderr"; then passed=$((passed + 1)); else
        fail "flags/$extra" "exit $rc, expected 2 naming config.json"; fi
done
rc=0
"$ATTNTRACE" "${gpt2[@]}" --heads 4 --causal < /dev/null > /dev/null 2> "$work/stderr" || rc=$?
if [[ $rc == 0 ]]; then passed=$((passed + 1)); else fail "flags/equal" "--heads 4 --causal equal the config: exit $rc"; fi

# ---- --normed: the golden normed input gives the same output; an unbatched (L, E) input ------------
for model in llama gpt2; do
    golden="$MODELS/$model/golden"
    if "$ATTNTRACE" mha --model "$MODELS/$model" --layer 1 -q "$golden/normed_L1.npy" --normed --trace none \
            -o "$work/normed_out.npy" < /dev/null 2> "$work/stderr" &&
        compare "$model/--normed" output "$work/normed_out.npy" "$golden/output_L1.npy" 1e-4 1e-5; then
        passed=$((passed + 1))
    else
        fail "$model/--normed" "$(cat "$work/stderr")"
    fi
done
"$PYTHON" -c 'import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])[1])' \
    "$MODELS/bloom/golden/hidden_L1.npy" "$work/unbatched.npy"
"$PYTHON" -c 'import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])[1])' \
    "$MODELS/bloom/golden/weights_L1.npy" "$work/unbatched_w_golden.npy"
if "$ATTNTRACE" mha --model "$MODELS/bloom" --layer 1 -q "$work/unbatched.npy" --trace none \
        --attn-weights "$work/unbatched_w.npy" < /dev/null 2> "$work/stderr" &&
    compare "bloom/unbatched" weights "$work/unbatched_w.npy" "$work/unbatched_w_golden.npy" 1e-4 1e-5; then
    passed=$((passed + 1))
else
    fail "bloom/unbatched" "$(cat "$work/stderr")"
fi

# ---- info ----------------------------------------------------------------------------------------
if "$ATTNTRACE" info "$MODELS/mistral" > "$work/info.txt" 2>&1 &&
    grep -q "mistral, 3 layers" "$work/info.txt" && grep -q "model.layers.2.self_attn.k_proj.weight  F32 (8, 32)" "$work/info.txt" &&
    grep -q "sliding window 3" "$work/info.txt" && grep -q "^  --model --layer 2: RMSNorm" "$work/info.txt" &&
    "$ATTNTRACE" info "$MODELS/mistral/model-00001-of-00002.safetensors" | grep -q "(no config.json: --model takes the folder)"; then
    passed=$((passed + 1))
else
    fail "info" "info on the mistral checkpoint"
    sed 's/^/    /' "$work/info.txt"
fi

if "$ATTNTRACE" info --json "$MODELS/qwen3" > "$work/info.json" 2>&1 && "$PYTHON" -c '
import json, sys
info = json.load(open(sys.argv[1]))
assert info["model_type"] == "qwen3" and info["layers"] == 3 and len(info["layer"]) == 3, info
names = [t["name"] for t in info["layer"][1]["tensors"]]
assert "model.layers.1.self_attn.q_norm.weight" in names, names
' "$work/info.json"; then
    passed=$((passed + 1))
else
    fail "info --json" "info --json on the qwen3 checkpoint"
    head -5 "$work/info.json" | sed 's/^/    /'
fi

# ---- issue 36: soft-capping on both attention kernels, the new families' plans ------------------
# on_both_kernels NAME GOLDEN OUT COMMAND...: COMMAND (writing OUT) under the blas and the avx512
# kernels (or those KERNELS names), OUT compared with GOLDEN; a kernel this CPU lacks is said and
# skipped. KERNEL_VAR names the variable that chooses (default ATTNTRACE_ATTENTION_KERNEL).
on_both_kernels() {
    local name=$1 golden=$2 out=$3 kernel rc var=${KERNEL_VAR:-ATTNTRACE_ATTENTION_KERNEL}
    shift 3
    for kernel in ${KERNELS:-blas avx512}; do
        rc=0
        env "$var=$kernel" "$@" < /dev/null 2> "$work/stderr" || rc=$?
        if [[ $rc == 2 ]] && grep -q "cannot run" "$work/stderr"; then
            echo "  (kernel $kernel: not on this CPU)"
        elif [[ $rc == 0 ]] && compare "$name/$kernel" output "$out" "$golden" 1e-4 1e-5; then
            passed=$((passed + 1))
        else
            fail "$name/$kernel" "exit $rc: $(cat "$work/stderr")"
        fi
    done
}
# the weight products on both their kernels (ATTNTRACE_WEIGHT_GEMM, tensor/weight_gemm.hpp): GPT-2's
# Conv1D (in, out) weights and llama's (out, in) ones, each layer's golden output.
KERNELS="blas avx512 amx" KERNEL_VAR=ATTNTRACE_WEIGHT_GEMM on_both_kernels gpt2-weights "$MODELS/gpt2/golden/output_L1.npy" "$work/w.npy" \
    "$ATTNTRACE" mha --model "$MODELS/gpt2" --layer 1 -q "$MODELS/gpt2/golden/hidden_L1.npy" --trace none -o "$work/w.npy"
KERNELS="blas avx512 amx" KERNEL_VAR=ATTNTRACE_WEIGHT_GEMM on_both_kernels llama-weights "$MODELS/llama/golden/output_L1.npy" "$work/w.npy" \
    "$ATTNTRACE" mha --model "$MODELS/llama" --layer 1 -q "$MODELS/llama/golden/hidden_L1.npy" --trace none -o "$work/w.npy"
# a checkpoint's float32 weights mapped in place or copied into reused buffers (ATTNTRACE_WEIGHT_PAGES,
# io/file_bytes.hpp): the same golden output either way
KERNELS="map read" KERNEL_VAR=ATTNTRACE_WEIGHT_PAGES on_both_kernels gpt2-pages "$MODELS/gpt2/golden/output_L1.npy" "$work/w.npy" \
    "$ATTNTRACE" mha --model "$MODELS/gpt2" --layer 1 -q "$MODELS/gpt2/golden/hidden_L1.npy" --trace none -o "$work/w.npy"
# gemma2's layer 0 soft-caps its scores (3.0) under a window of 3: the tiled path (no weights kept)
# must give the golden output whichever kernel is chosen (the fused one leaves capping to BLAS).
on_both_kernels gemma2 "$MODELS/gemma2/golden/output_L0.npy" "$work/capped.npy" "$ATTNTRACE" mha \
    --model "$MODELS/gemma2" --layer 0 -q "$MODELS/gemma2/golden/hidden_L0.npy" --trace none -o "$work/capped.npy"
# sdpa --softcap C: numpy's tanh-capped scores, causal, on both kernels (a long enough Lk for the tiled path)
"$PYTHON" - "$work" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(5)
q, k, v = (rng.standard_normal((2, 300, 16)).astype(np.float32) * 2 for _ in range(3))
for name, a in (("q", q), ("k", k), ("v", v)):
    np.save(f"{sys.argv[1]}/sc_{name}.npy", a)
s = np.tanh(q.astype(np.float64) @ k.transpose(0, 2, 1).astype(np.float64) / 4 / 1.5) * 1.5
s = np.where(np.tril(np.ones((300, 300), bool)), s, -np.inf)
w = np.exp(s - s.max(-1, keepdims=True))
np.save(f"{sys.argv[1]}/sc_golden.npy", (w / w.sum(-1, keepdims=True)) @ v.astype(np.float64))
PY
on_both_kernels "sdpa --softcap" "$work/sc_golden.npy" "$work/sc_out.npy" "$ATTNTRACE" sdpa -q "$work/sc_q.npy" \
    -k "$work/sc_k.npy" -v "$work/sc_v.npy" --softcap 1.5 --causal --trace none -o "$work/sc_out.npy"
rc=0
"$ATTNTRACE" mha --model "$MODELS/gemma2" --layer 0 -q "$MODELS/gemma2/golden/hidden_L0.npy" --softcap 4 \
    --trace none < /dev/null > /dev/null 2> "$work/stderr" || rc=$?
if [[ $rc == 2 ]] && grep -q -- "--softcap: 4 but" "$work/stderr"; then passed=$((passed + 1)); else
    fail "flags/--softcap" "exit $rc, expected 2: $(cat "$work/stderr")"; fi
if "$ATTNTRACE" info "$MODELS/gemma2" > "$work/info.txt" 2>&1 &&
    grep -q "RMSNorm x (1 + w) (eps 1e-06) -> .* softmax(tanh(q k^T \* 0.25 / 3) \* 3), causal, sliding window 3" "$work/info.txt" &&
    grep -q "^  model: gemma2, 3 layers.*norms before and after attention and MLP, embeddings x sqrt(32)" "$work/info.txt" &&
    "$ATTNTRACE" info "$MODELS/phi3" | grep -q "(fused qkv_proj \[q; k; v\]) .* rotary on 4 of 8 dims (LongRoPE)" &&
    "$ATTNTRACE" info "$MODELS/olmo2" | grep -q "^  --model --layer 1: q/k/v projections .* q_norm/k_norm RMSNorm over the projection" &&
    "$ATTNTRACE" info "$MODELS/olmoe" | grep -q "^  model: olmoe.*; 2 MoE layers: top 2 of 4 experts of 16"; then
    passed=$((passed + 1))
else
    fail "info (issue 36 families)" "$(cat "$work/info.txt")"
fi

# ---- memory map: a >2 GB checkpoint, one layer -------------------------------------------------
mkdir -p "$work/big"
if "$PYTHON" "$SRC/tests/e2e/checkpoint_memory.py" "$ATTNTRACE" "$work/big" > "$work/memory.txt" 2>&1; then
    passed=$((passed + 1))
    sed 's/^/  /' "$work/memory.txt"
else
    fail "memory" "one layer of a 24-layer checkpoint"
    sed 's/^/    /' "$work/memory.txt"
fi
rm -rf "$work/big"

echo "checkpoints: $passed passed, $failed failed"
[[ $failed == 0 ]]
