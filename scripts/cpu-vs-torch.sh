#!/bin/sh
# vdpp against diffusers on PyTorch on this CPU, side by side (see
# scripts/cpuvstorch/compare.py for the cases and what is measured). Needs Debian's
# python3-torch and python3-numpy (/usr/bin/python3) and the diffusers mirror that
# scripts/wanref/common.py reads.
#
# Usage: scripts/cpu-vs-torch.sh [--cases a,b,c,d,e] [--rounds 4] [--calls 3] [--threads 2] [--json FILE]
set -eu
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/vdpp" ./cmd/vdpp
go build -o "$bin/cpuvstorch" ./scripts/cpuvstorch
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} /usr/bin/python3 scripts/cpuvstorch/compare.py \
	--vdpp "$bin/vdpp" --helper "$bin/cpuvstorch" "$@"
