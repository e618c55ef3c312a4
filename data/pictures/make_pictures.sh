#!/usr/bin/env bash
# The README's pictures of the seed examples: run from the repository root after building,
#   bash data/pictures/make_pictures.sh [build/attntrace]
# It rewrites data/pictures/*.png (and the one .svg) with exactly the commands the README shows.
set -euo pipefail
A=${1:-build/attntrace}
P=data/pictures
# Peter Bloem's two-head self-attention on x (2, 10, 6), batch 0; x is random, the tokens only
# show --labels.
"$A" mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors --scale 0.4082482904638631 \
    --trace none --plot $P/bloem.png --labels $P/bloem_tokens.txt
# d2l's five heads with valid lengths 3,2: keys past the valid length get no weight (batch 1).
"$A" mha -q data/d2l/queries.npy -k data/d2l/keys.npy -v data/d2l/values.npy --heads 5 \
    --params data/d2l/params.safetensors --valid-lens 3,2 --trace none --plot $P/d2l.png --batch 1
# atcold's three heads, queries x_q (.., 5) against keys x_kv, as SVG.
"$A" mha -q data/atcold/x_q.npy -k data/atcold/x_kv.npy --heads 3 --params data/atcold/params.safetensors \
    --trace none --plot $P/atcold.svg
# a long causal sequence (L = 4096), pooled to 1024 x 1024 cells in the tiled path (--scale 3 makes
# the random heads peaked enough to see).
"$A" random --shape 1,4096,32 --seed 3 -o long.npy
"$A" mha -q long.npy --heads 4 --causal --scale 3 --trace none --plot $P/long_causal.png
rm -f long.npy
