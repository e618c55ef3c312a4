#!/usr/bin/env bash
# The memory claim of attntrace model on a quantized GGUF file (issue 37): a 2.2 GB random Q8_0
# Llama GGUF made at test time (tests/goldens/make_big_gguf.py: E 2048, I 5632, 40+ layers of 48 MB
# in Q8_0, 180 MB each dequantized to float32, Q8_0 embeddings and output) in the build folder,
# deleted after. The whole forward of 64 tokens with its next-token predictions (every layer, the
# token embedding gathered by row and the output read in blocks) must peak at most at one layer's
# weights dequantized to float32, plus the activations, plus 200 MB, as model_memory.sh asks of a
# checkpoint: each layer is dequantized from the mapping when its turn comes and its pages dropped.
# Peak RSS from GNU time (-f %M). Skipped (77) with less than 3 GB free.
# Env: ATTNTRACE (binary), SRC (repo root), PYTHON (/usr/bin/python3 with numpy).
source "$(dirname "$0")/cli_common.bash"
need_numpy
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time (Debian package time)"; exit 77; }
BIG="$(dirname "$(realpath "$A")")/gguf_memory.big.gguf"
rm -f "$BIG"
free=$(df -Pk "$(dirname "$BIG")" | awk 'NR == 2 { print $4 }')
[ "$free" -ge $((3 * 1024 * 1024)) ] || { echo "SKIP: $(( free / 1024 )) MB free next to the build, 3 GB needed"; exit 77; }
trap 'rm -rf "$W" "$BIG"' EXIT

"$PYTHON" "$SRC/tests/goldens/make_big_gguf.py" "$BIG" --gb 2.2 --seed 1 > "$W/made.json"
ids=$(seq -s, 100 163)  # 64 tokens
/usr/bin/time -f '%M' -o "$W/rss" "$A" model "$BIG" --ids "$ids" --top 3 --threads 2 --format json > "$W/out.json" ||
    fail "attntrace model on the big Q8_0 GGUF file: exit $?"
"$PYTHON" - "$W/made.json" "$W/rss" "$W/out.json" <<'PY'
import json, sys
made, rss_kib, out = json.load(open(sys.argv[1])), int(open(sys.argv[2]).read().split()[-1]), json.load(open(sys.argv[3]))
E, I, L, V, threads = 2048, 5632, 64, 32000, 2
layer = made["layer_bytes_f32"]
# as model_memory.sh: the residual and normed rows, q/k/v, attention's rows and output, the MLP's
# middle twice (SwiGLU), the logits of one position, the head's blocks of 512 rows per thread
activations = 4 * (8 * L * E + 2 * L * I + threads * 256 * L + V + threads * 512 * E)
limit = layer + activations + 200 * 2**20
rss = rss_kib * 1024
mb = lambda b: f"{b / 2**20:.0f} MB"
print(f"{made['layers']} layers, {made['bytes'] / 1e9:.2f} GB Q8_0: peak RSS {mb(rss)}; limit {mb(limit)} = one layer "
      f"dequantized to float32 {mb(layer)} + activations {mb(activations)} + 200 MB")
assert len(out["predictions"]["positions"][0]["top"]) == 3 and len(out["layers"]) == made["layers"], "the run is incomplete"
if rss > limit:
    sys.exit(f"FAIL: peak RSS {mb(rss)} is over the limit {mb(limit)}")
if made["bytes"] < 2e9:
    sys.exit("FAIL: the file is under 2 GB")
PY
