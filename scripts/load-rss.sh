#!/bin/sh
# Peak host memory of loading one bf16 Wan expert onto the pure-Go backend: writes a
# two-expert folder with bf16 random weights (scripts/wanmoe, 323 M parameters per expert,
# 646 MB as stored, 1293 MB in float32) and loads `transformer` with scripts/loadrss, which
# prints the peak RSS. The weights stay bf16 (memory-mapped) until each tensor is converted
# to float32 as it is copied onto the backend, so the peak is the backend's float32 copy plus
# one tensor, not a whole float32 copy on top.
# Usage: scripts/load-rss.sh [OUT [REF_WAN_FOLDER]]
set -eu
cd "$(dirname "$0")/.."
out=${1:-/tmp/load-rss}
ref=${2:-../shared/golden/wan-dev}
[ -f "$out/transformer/diffusion_pytorch_model.safetensors" ] ||
	go run ./scripts/wanmoe -out "$out" -ref "$ref" -heads 12 -head-dim 128 -ffn 6144 -layers 8 -dtype BF16
go build -o "$out/loadrss" ./scripts/loadrss
"$out/loadrss" -dir "$out/transformer"
