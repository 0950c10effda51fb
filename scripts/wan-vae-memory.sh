#!/bin/sh
# Peak resident memory (VmHWM) of the Wan VAE on the pure-Go backend, one process per run:
# untiled against diffusers' default tiling (256-pixel tiles every 192) at HEIGHT x WIDTH,
# then a streamed decode of 2 against 6 latent frames at half the size.
#
# GOMEMLIMIT (default 256MiB) makes Go's collector run when the heap nears it. Without it
# the collector runs rarely and simplego's per-size buffer pools keep freed buffers alive
# until the next collection, so RSS follows the garbage made since the last collection
# (it grows with the run's length) rather than what the decode needs.
#
# Usage: scripts/wan-vae-memory.sh [VAE_DIR [HEIGHT WIDTH]]
set -eu
cd "$(dirname "$0")/.."
dir=${1:-model/wan/vae/testdata/tiled}
h=${2:-384}
w=${3:-384}
export GOMEMLIMIT="${GOMEMLIMIT:-256MiB}"
go build -o /tmp/wanvaemem ./scripts/wanvaemem
for op in decode encode; do
	for tiled in false true; do
		/tmp/wanvaemem -vae "$dir" -op $op -tiled=$tiled -height "$h" -width "$w" -latent-frames 2
	done
done
for n in 2 6; do
	/tmp/wanvaemem -vae "$dir" -op decode -height $((h / 2)) -width $((w / 2)) -latent-frames $n
done
