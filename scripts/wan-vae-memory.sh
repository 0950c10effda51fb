#!/bin/sh
# Peak resident memory of the Wan VAE, untiled against diffusers' default tiling (256-pixel
# tiles every 192), each run in its own process on the pure-Go backend.
# Usage: scripts/wan-vae-memory.sh [VAE_DIR [HEIGHT WIDTH]]
set -eu
cd "$(dirname "$0")/.."
dir=${1:-model/wan/vae/testdata/tiled}
h=${2:-384}
w=${3:-384}
go build -o /tmp/wanvaemem ./scripts/wanvaemem
for op in decode encode; do
	for tiled in false true; do
		/tmp/wanvaemem -vae "$dir" -op $op -tiled=$tiled -height "$h" -width "$w" -latent-frames 2
	done
done
# Streaming keeps memory flat in the video's length: three times the latent frames.
/tmp/wanvaemem -vae "$dir" -op decode -tiled=true -height "$h" -width "$w" -latent-frames 6
