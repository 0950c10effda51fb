#!/usr/bin/env bash
# SVD's tiled VAE decode (--vae-tile, docs/long-video.md): peak RSS of one decode process
# untiled and in tiles, and the tiled frames' difference to the untiled ones (max abs and
# PSNR in [0, 1]), on the built-in model (7 frames of 256x256) and on the dev checkpoint
# (3 frames of 128x128). Usage: scripts/svd-vae-tile.sh [OUT] (default out/svd-vae-tile).
set -euo pipefail
out=${1:-out/svd-vae-tile}
dev=${DEV:-../shared/golden/dev}
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
go build -o "$out/svdvaetile" ./scripts/svdvaetile
t=$out/svdvaetile
"$out/vdpp" data --out "$out/data" --num-samples 1 >/dev/null
clip=$(dirname "$(find "$out/data" -name '000.png' | sort | head -1)")
run() { # name model frames size tiles...
  local name=$1 model=$2 frames=$3 size=$4
  shift 4
  "$t" -op encode -model "$model" -images "$clip" -frames "$frames" -height "$size" -width "$size" -out "$out/$name-z.safetensors"
  for tile in 0 "$@"; do
    "$t" -op decode -model "$model" -latents "$out/$name-z.safetensors" -tile "$tile" -out "$out/$name-$tile.safetensors"
  done
  for tile in "$@"; do
    "$t" -op compare -a "$out/$name-0.safetensors" -b "$out/$name-$tile.safetensors"
  done
}
run builtin builtin 7 256 64 128
if [ -d "$dev" ]; then run dev "$dev" 3 128 32 64; fi
