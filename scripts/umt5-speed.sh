#!/bin/sh
# umt5-speed.sh TRANSFORMERS_SRC: the umT5 text encoder's forward time in Go (simplego,
# BenchmarkForward) and in PyTorch CPU (transformers' modeling_umt5.py) on the same weights
# and shapes, one after the other on the machine it runs on: the golden cases of model/umt5/testdata
# and a random d_model 512, 8-layer, 8-head config at 512 and 64 tokens. THREADS (default:
# all CPUs) sets torch.set_num_threads and GOMAXPROCS alike.
# Debian's PyTorch uses the reference BLAS; to time it with OpenBLAS instead (as docs/wan.md
# does), unpack libopenblas0-pthread and set PYTORCH_LD_LIBRARY_PATH to its
# usr/lib/x86_64-linux-gnu/openblas-pthread folder.
# TRANSFORMERS_SRC is a transformers checkout's src/transformers (see
# model/umt5/testdata/README.md). Results go to stdout; docs/text.md has a run.
set -eu
src=${1:?usage: scripts/umt5-speed.sh TRANSFORMERS_SRC}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TMPDIR:-/tmp}/umt5-speed-d512
threads=${THREADS:-$(nproc)}
echo "== $(uptime)"
echo "== PyTorch CPU, median of 10 runs (2 for d512)"
LD_LIBRARY_PATH=${PYTORCH_LD_LIBRARY_PATH:-${LD_LIBRARY_PATH:-}} /usr/bin/python3 "$root/scripts/umt5_speed.py" --transformers "$src" --out "$out" --threads "$threads"
echo "== Go (GOMLX_BACKEND=go, GOMAXPROCS=$threads), mean of 10 runs"
cd "$root"
VDPP_UMT5_BENCH_DIR=$out GOMAXPROCS=$threads GOMLX_BACKEND=go go test ./model/umt5 -run '^$' -bench Forward -benchtime 10x |
	awk '/^Benchmark/ { printf "%-40s %10.3f ms\n", $1, $3 / 1e6 }'
