#!/usr/bin/env bash
# attntrace on GGUF files (tests/fixtures/gguf/<case>/, made by tests/goldens/make_gguf_goldens.py:
# llama, Mistral's and Llama 3's files, qwen2, qwen3, gpt2, gemma, gemma2, gemma3, phi3; f32, f16,
# bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K ... q6_K, iq4_xs, a q4_K_M mix, a split model)
# against their goldens:
#   - model --ids on the dequantized path (ATTNTRACE_GGUF_PRODUCTS=float32, and --dtype f64):
#     hidden_states, attentions and logits equal hf_model.py's float64 forward on the weights ggml
#     itself dequantizes (rtol 1e-4, atol 1e-5 x the largest golden magnitude in f32; rtol 1e-9,
#     atol 1e-10 in f64), as the checkpoint goldens (model_goldens.sh);
#   - its logits agree with llama.cpp's own on the same file within what llama.cpp's quantized
#     products change: max |ours - llama.cpp| <= the measured max |llama.cpp - reference|
#     (cases.json) + 1e-4 x the largest logit;
#   - the default, quantized path (products over the quantized weights, activations rounded to 8
#     bits as ggml rounds them) agrees with llama.cpp's own logits within 1e-4 x the largest logit
#     where every weight is f32 or of a type quantized_gemm takes and the family has no GELU
#     (measured: at most 3e-6, the float sums' order); elsewhere (f16, bf16, iq4_nl, q2_K, q3_K,
#     iq4_xs weights, which llama.cpp multiplies with activations rounded to f16 or q8_K; GELU,
#     which ggml takes from an fp16 table) within the dequantized path's bound;
#   - the same on every quantized-product kernel the CPU runs (scalar, AVX2, AVX-512 VNNI, AMX);
#   - mha --model FILE.gguf --layer N equals the golden attention of layer N, one case per
#     architecture;
#   - info --format json names the architecture, the layers and each tensor type's count;
#   - a bad ATTNTRACE_GGUF_PRODUCTS or ATTNTRACE_GEMM_KERNEL refused (exit 2), no output over the
#     file, and lens, ablate and attribute taking a GGUF MODEL (--text on GGUF files: gguf_text.sh).
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "${BASH_SOURCE[0]}")/golden_common.bash"
CASES="$SRC/tests/fixtures/gguf"
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PYTHON has no numpy"; exit 77; }

# close NAME ACTUAL EXPECTED RTOL ATOL [BOUND]: allclose with ATOL scaled by the expected array's
# largest magnitude (at least 1); with BOUND, max |actual - expected| <= BOUND instead.
close() {
    "$PYTHON" - "$@" <<'PY' || return 1
import sys
import numpy as np
name, got, want, rtol, atol = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
if got.shape != want.shape:
    sys.exit(f"FAIL {name}: shape {got.shape}, golden {want.shape}")
scale = max(1.0, float(np.abs(want).max()))
diff = np.abs(got.astype(np.float64) - want)
if len(sys.argv) > 6:
    if diff.max() > float(sys.argv[6]):
        sys.exit(f"FAIL {name}: max abs diff {diff.max():.3g}, more than {float(sys.argv[6]):.3g}")
elif not np.allclose(got, want, rtol=rtol, atol=atol * scale):
    where = np.unravel_index(np.argmax(diff), diff.shape)
    sys.exit(f"FAIL {name}: max abs diff {diff.max():.3g} at {where} (rtol {rtol}, atol {atol} x {scale:.3g})")
PY
}

# case_field CASE KEY: a field of CASE in cases.json
case_field() {
    "$PYTHON" -c 'import json, sys; c = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}[sys.argv[2]]; print(c[sys.argv[3]])' \
        "$CASES/cases.json" "$1" "$2"
}

for dir in "$CASES"/*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    gold="$dir/golden"
    file=$(ls "$dir"/model*.gguf | head -n 1)  # a split model is named by its first file
    for dtype in f32 f64; do
        if [[ $dtype == f32 ]]; then rtol=1e-4 atol=1e-5; else rtol=1e-9 atol=1e-10; fi
        rm -f "$work"/{h,a,l}.npy
        if ! ATTNTRACE_GGUF_PRODUCTS=float32 "$ATTNTRACE" model "$file" --ids "$dir/ids.npy" --dtype $dtype --hidden-states "$work/h.npy" \
            --attentions "$work/a.npy" --logits "$work/l.npy" --top 0 < /dev/null > "$work/out" 2> "$work/err"; then
            fail "$name/$dtype" "exit $?: $(cat "$work/err")"
            continue
        fi
        ok=1
        close "$name/$dtype hidden_states" "$work/h.npy" "$gold/hidden_states.npy" $rtol $atol || ok=0
        close "$name/$dtype attentions" "$work/a.npy" "$gold/attentions.npy" $rtol $atol || ok=0
        close "$name/$dtype logits" "$work/l.npy" "$gold/logits.npy" $rtol $atol || ok=0
        [[ $ok == 1 ]] && passed=$((passed + 1)) || failed=$((failed + 1))
    done
    # llama.cpp's own logits, within what its quantized products change (float32), or within
    # 1e-4 x the largest logit where the quantized path rounds as llama.cpp does (quantized)
    for products in float32 quantized; do
        rm -f "$work/l.npy"
        ATTNTRACE_GGUF_PRODUCTS=$products "$ATTNTRACE" model "$file" --ids "$dir/ids.npy" --logits "$work/l.npy" \
            --top 0 < /dev/null > /dev/null 2>&1
        bound=$("$PYTHON" - "$CASES/cases.json" "$name" $products <<'PY'
import json, sys
case = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}[sys.argv[2]]
scale = 1e-4 * max(1.0, case["logits_max_abs"])
# the types the quantized path multiplies as llama.cpp does (quantized_gemm's, and f32)
same = set(case["tensor_types"]) <= {"f32", "q8_0", "q4_0", "q5_0", "q4_1", "q5_1", "q4_k", "q5_k", "q6_k"}
gelu = case["architecture"] in ("gpt2", "gemma", "gemma2", "gemma3")  # ggml's GELU: an fp16 table
exact = sys.argv[3] == "quantized" and same and not gelu
print(scale if exact else case["llama_cpp_vs_reference"] + scale)
PY
)
        close "$name ($products) vs llama.cpp" "$work/l.npy" "$gold/llama_cpp_logits.npy" 0 0 "$bound" &&
            passed=$((passed + 1)) || failed=$((failed + 1))
    done
    # info --format json: the architecture, the layers, the tensor types and their counts
    if "$ATTNTRACE" info --format json "$file" > "$work/info.json" 2> "$work/err" &&
        "$PYTHON" - "$work/info.json" "$CASES/cases.json" "$name" "$gold/attentions.npy" <<'PY'; then
import json, sys
import numpy as np
info = json.load(open(sys.argv[1]))
case = {c["name"]: c for c in json.load(open(sys.argv[2]))["cases"]}[sys.argv[3]]
layers = np.load(sys.argv[4]).shape[0]
assert info["architecture"] == case["architecture"], (info["architecture"], case)
assert info["sizes"]["layers"] == layers and len(info["layer"]) == layers, info["sizes"]
types = {t["type"].lower(): t["tensors"] for t in info["tensor_types"]}
assert types == case["tensor_types"], (types, case["tensor_types"])
assert all(t["read"] for t in info["tensor_types"]) and info["files"] == len(case["files"]), info
PY
        passed=$((passed + 1))
    else
        fail "$name info" "$(cat "$work/err")"
    fi
done

# on_kernel KERNEL DIR IDS: the quantized path's logits of DIR's model.gguf on IDS into $work/l.npy,
# with ATTNTRACE_GEMM_KERNEL=KERNEL; false when this CPU cannot run KERNEL (refused, exit 2: skipped)
on_kernel() {
    local code=0
    rm -f "$work/l.npy"
    ATTNTRACE_GEMM_KERNEL=$1 "$ATTNTRACE" model "$2/model.gguf" --ids "$3" --logits "$work/l.npy" \
        --top 0 < /dev/null > /dev/null 2> "$work/err" || code=$?
    ! { [[ $code == 2 ]] && grep -q "cannot run" "$work/err"; }
}

# The quantized path on every kernel this CPU runs (ATTNTRACE_GEMM_KERNEL): each within the same
# tight bound of llama.cpp's logits (a kernel the CPU cannot run is refused, exit 2, and skipped)
for name in llama_q8_0 qwen2_q4_1 llama256_q4_k_m; do
    dir="$CASES/$name"
    bound=$("$PYTHON" -c 'import json, sys; c = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}[sys.argv[2]]; print(1e-4 * max(1.0, c["logits_max_abs"]))' \
        "$CASES/cases.json" "$name")
    for kernel in scalar avx2 avx512_vnni amx; do
        on_kernel $kernel "$dir" "$dir/ids.npy" || continue
        close "$name ($kernel) vs llama.cpp" "$work/l.npy" "$dir/golden/llama_cpp_logits.npy" 0 0 "$bound" &&
            passed=$((passed + 1)) || failed=$((failed + 1))
    done
done

# 40 positions (golden/ids_long.npy, tests/goldens/make_gguf_long_goldens.py): enough rows for the
# AMX kernels' tiles of 16, on one file of each type quantized_gemm takes, on every kernel this CPU
# runs. Every position within what llama.cpp's own quantized products change (the case's
# llama_cpp_vs_reference, plus 1e-4 of the largest logit), and most positions (the median one)
# within 1e-4 of the largest logit: one activation rounded to the other side of a q8 step (the
# scalar kernel sums as ggml's generic C does, llama.cpp's build as its SIMD code does; another
# OpenBLAS kernel moves the attention's last bits) moves its position by a q8 step's worth.
for name in llama_q8_0 llama_q4_0 qwen3_q5_0 qwen2_q4_1 mistral_q5_1 llama256_q4_k llama256_q5_k llama256_q6_k \
    llama256_q4_k_m; do
    dir="$CASES/$name"
    loose=$(case_field "$name" llama_cpp_vs_reference)
    for kernel in scalar avx2 avx512_vnni amx; do
        on_kernel $kernel "$dir" "$dir/golden/ids_long.npy" || continue
        "$PYTHON" - "$name ($kernel, 40 positions) vs llama.cpp" "$work/l.npy" "$dir/golden/llama_cpp_logits_long.npy" \
            "$loose" <<'PY' && passed=$((passed + 1)) || failed=$((failed + 1))
import sys
import numpy as np
name, want, loose = sys.argv[1], np.load(sys.argv[3]), float(sys.argv[4])
try:
    got = np.load(sys.argv[2])
except OSError as e:
    sys.exit(f"FAIL {name}: no logits ({e})")
if got.shape != want.shape:
    sys.exit(f"FAIL {name}: shape {got.shape}, golden {want.shape}")
tight = 1e-4 * max(1.0, float(np.abs(want).max()))
rows = np.abs(got.astype(np.float64) - want).max(axis=1)
if not rows.max() <= loose + tight or not np.median(rows) <= tight:
    sys.exit(f"FAIL {name}: per position max |diff| largest {rows.max():.3g} (bound {loose + tight:.3g}), "
             f"median {np.median(rows):.3g} (bound {tight:.3g})")
PY
    done
done

# mha --model FILE.gguf --layer N: layer N's attention as the whole model computes it
for name in llama_q8_0 mistral_q5_1 qwen2_q4_1 qwen3_bf16_split gpt2_q8_0 gemma_f16 gemma2_q8_0 gemma3_q5_1 phi3_q4_0 \
    llama256_q4_k; do
    dir="$CASES/$name"
    file=$(ls "$dir"/model*.gguf | head -n 1)
    layers=$("$PYTHON" -c 'import numpy, sys; print(numpy.load(sys.argv[1]).shape[0])' "$dir/golden/attentions.npy")
    n=$((layers - 1))
    "$PYTHON" -c 'import numpy as np, sys; h = np.load(sys.argv[1]); np.save(sys.argv[2], h[int(sys.argv[3])][None].astype(np.float32)); np.save(sys.argv[4], np.load(sys.argv[5])[int(sys.argv[3])][None])' \
        "$dir/golden/hidden_states.npy" "$work/x.npy" $n "$work/w_gold.npy" "$dir/golden/attentions.npy"
    if "$ATTNTRACE" mha --model "$file" --layer $n -q "$work/x.npy" --trace none --attn-weights "$work/w.npy" \
        < /dev/null > /dev/null 2> "$work/err"; then
        close "$name mha --layer $n" "$work/w.npy" "$work/w_gold.npy" 1e-4 1e-5 && passed=$((passed + 1)) ||
            failed=$((failed + 1))
    else
        fail "$name mha --model" "$(cat "$work/err")"
    fi
done

# The command line around a GGUF file: an output may not replace the file (exit 4); the analyses
# take it as MODEL.
file="$CASES/qwen3_q5_0/model.gguf"
expect() {  # NAME CODE TEXT CMD...: CMD exits CODE, its one stderr line holding TEXT
    local name=$1 code=$2 text=$3 got=0
    shift 3
    "$@" < /dev/null > "$work/out" 2> "$work/err" || got=$?
    if [[ $got != "$code" ]] || { [[ -n $text ]] && ! grep -qF -- "$text" "$work/err"; } ||
        [[ $(wc -l < "$work/err") -gt 1 ]]; then
        fail "$name" "exit $got: $(cat "$work/err")"
    else
        passed=$((passed + 1))
    fi
}
expect "ATTNTRACE_GEMM_KERNEL=fast" 2 "ATTNTRACE_GEMM_KERNEL: 'fast' is not one of best, scalar, avx2, avx512_vnni, amx" \
    env ATTNTRACE_GEMM_KERNEL=fast "$ATTNTRACE" model "$file" --ids 1,2
expect "ATTNTRACE_GGUF_PRODUCTS=fast" 2 "ATTNTRACE_GGUF_PRODUCTS: 'fast' is not one of quantized, float32" \
    env ATTNTRACE_GGUF_PRODUCTS=fast "$ATTNTRACE" model "$file" --ids 1,2
cp "$file" "$work/m.gguf"
expect "model --logits over the file" 4 "refusing to overwrite an input file" \
    "$ATTNTRACE" model "$work/m.gguf" --ids 1,2 --logits "$work/m.gguf"
cmp -s "$file" "$work/m.gguf" && passed=$((passed + 1)) || fail "model --logits over the file" "the file was changed"
expect "lens on a GGUF file" 0 "" "$ATTNTRACE" lens "$file" --ids 3,17,42,17,42
expect "ablate on a GGUF file" 0 "" "$ATTNTRACE" ablate "$file" --ids 3,17,42,17,42 --heads 1.0,1.3
expect "attribute on a GGUF file" 0 "" "$ATTNTRACE" attribute "$file" --ids 3,17,42,17,42 --target-id 257

echo "gguf goldens: $passed passed, $failed failed"
[[ $failed == 0 ]]
