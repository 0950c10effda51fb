#!/bin/sh
# Peak resident memory of the Wan VAE, untiled against diffusers' default tiling (256-pixel
# tiles every 192), each run in its own process. Usage: scripts/wan-vae-memory.sh [HEIGHT WIDTH]
set -eu
cd "$(dirname "$0")/.."
h=${1:-384}
w=${2:-384}
go build -o /tmp/wanvaemem ./scripts/wanvaemem
for op in decode encode; do
	for tiled in false true; do
		GOMAXPROCS=2 /tmp/wanvaemem -op $op -tiled=$tiled -height "$h" -width "$w" -latent-frames 3
	done
done
# Streaming keeps memory flat in the video's length: 3 times the frames.
GOMAXPROCS=2 /tmp/wanvaemem -op decode -tiled=true -height "$h" -width "$w" -latent-frames 9
