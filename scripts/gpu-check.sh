#!/usr/bin/env bash
# gpu-check.sh: vdpp's checks and benchmarks on an NVIDIA GPU machine (no internet, no
# Go). docs/gpu.md says how to prepare and carry what it needs and what it measures.
#
# Usage: scripts/gpu-check.sh PHASE...   (phases run in order; "all" = every phase)
#   env      device, driver, CUDA, Python package versions, `vdpp doctor --try`
#   parity   vdpp parity on the golden dev checkpoint under XLA CUDA
#   go       vdpp unetbench: SVD-XT UNet, 576x1024, 14 and 25 frames, batch 2
#   torch    diffusers' UNetSpatioTemporalConditionModel, eager (SDPA), same shapes
#   compile  the same with torch.compile
#   multi    vdpp bench --model DIR with 2, 3 and 4 processes sharing the GPU
#   table    results.md from everything measured so far
#
# Inputs (paths relative to the repository root; override with the variables):
#   VDPP=.gpu/bin/vdpp            the vdpp binary built on the development machine
#   GOLDEN=.gpu/golden/dev        a copy of ../shared/golden/dev
#   DIFFUSERS=third_party_ref/diffusers/src   diffusers' source (git-ignored, never committed)
#   RESULTS=/tmp/vdpp-gpu         where results accumulate across calls on a warm machine
#   FRAMES="14 25" GO_DTYPES="f32 bf16" TORCH_DTYPES="bf16 f32" COMPILE_DTYPES=bf16
#   ITERS=10 WARMUP=2 NPROCS="2 3 4" BACKEND=xla:<plugin found>
# Every phase copies RESULTS to $OUT (when set) so the files come back after each call.
set -uo pipefail
cd "$(dirname "$0")/.."

VDPP=${VDPP:-.gpu/bin/vdpp}
GOLDEN=${GOLDEN:-.gpu/golden/dev}
DIFFUSERS=${DIFFUSERS:-third_party_ref/diffusers/src}
RESULTS=${RESULTS:-/tmp/vdpp-gpu}
FRAMES=${FRAMES:-"14 25"}
GO_DTYPES=${GO_DTYPES:-"f32 bf16"}
TORCH_DTYPES=${TORCH_DTYPES:-"bf16 f32"}
COMPILE_DTYPES=${COMPILE_DTYPES:-"bf16"}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
NPROCS=${NPROCS:-"2 3 4"}
PY=${PY:-python3}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1

log() { echo "[gpu-check $(date -u +%H:%M:%S)] $*" | tee -a "$RESULTS/log.txt" >&2; }

# find_plugin prints JAX's pip-installed CUDA PJRT plugin (newest CUDA major first).
find_plugin() {
	"$PY" - <<'PYEOF' 2>/dev/null
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for p in sorted(glob.glob(os.path.join(r, "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so")), reverse=True):
        print(os.path.abspath(p)); sys.exit(0)
sys.exit(1)
PYEOF
}

if [[ -z "${BACKEND:-}" ]]; then
	if plugin=$(find_plugin); then BACKEND="xla:$plugin"; else BACKEND="xla:cuda"; fi
fi
export VDPP_BACKEND_USED="$BACKEND"
echo "$BACKEND" >"$RESULTS/backend.txt"

# gpu_mem_peak CMD... runs CMD while sampling the GPU's used memory every 100 ms and
# writes the peak above the idle level (MiB) to $MEMFILE.
gpu_mem_peak() {
	local base samples pid rc
	base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
	samples=$(mktemp)
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$samples" 2>/dev/null &
	pid=$!
	"$@"
	rc=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	sort -n "$samples" | tail -1 | awk -v b="$base" '{print $1 - b}' >"$MEMFILE"
	rm -f "$samples"
	return $rc
}

phase_env() {
	log "env"
	{
		echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
		echo "kernel: $(uname -r)"
		echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
		"$PY" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda)'
		"$PY" -m pip list 2>/dev/null | grep -Ei '^(jax|jaxlib|jax-cuda13-pjrt|jax-cuda13-plugin|nvidia-cudnn-cu13|nvidia-cublas|triton) '
		echo "diffusers: $(cat "$DIFFUSERS/../COMMIT" 2>/dev/null || echo unknown)"
		echo "vdpp: $("$VDPP" version 2>&1)"
		echo "backend: $BACKEND"
	} >"$RESULTS/env.txt" 2>&1
	cat "$RESULTS/env.txt"
	"$VDPP" doctor --backend "$BACKEND" --try --json >"$RESULTS/doctor.json" 2>"$RESULTS/doctor.err"
	echo "doctor exit $?" >>"$RESULTS/env.txt"
	"$VDPP" doctor --backend "$BACKEND" --try 2>&1 | tail -20
}

phase_parity() {
	log "parity on $GOLDEN with $BACKEND"
	"$VDPP" parity --golden "$GOLDEN" --backend "$BACKEND" --json "$RESULTS/parity.json" >"$RESULTS/parity.txt" 2>&1
	echo $? >"$RESULTS/parity.rc"
	tail -40 "$RESULTS/parity.txt"
}

phase_go() {
	for f in $FRAMES; do
		"$VDPP" unetbench --count-only --config xt --num-frames "$f" --height 576 --width 1024 --batch 2 >"$RESULTS/count_$f.json"
		for d in $GO_DTYPES; do
			log "go unet $d $f frames"
			MEMFILE="$RESULTS/go_${d}_${f}.mem" gpu_mem_peak \
				"$VDPP" unetbench --config xt --num-frames "$f" --height 576 --width 1024 --batch 2 --dtype "$d" \
				--backend "$BACKEND" --warmup "$WARMUP" --iters "$ITERS" --json "$RESULTS/go_${d}_${f}.json" \
				>"$RESULTS/go_${d}_${f}.txt" 2>&1
			echo $? >"$RESULTS/go_${d}_${f}.rc"
			tail -3 "$RESULTS/go_${d}_${f}.txt"
		done
	done
}

torch_phase() { # torch_phase MODE DTYPES
	local mode=$1 dtypes=$2
	for f in $FRAMES; do
		for d in $dtypes; do
			log "torch $mode $d $f frames"
			"$PY" scripts/gpu/torch_unet_bench.py --diffusers "$DIFFUSERS" --mode "$mode" --dtype "$d" --frames "$f" \
				--height 576 --width 1024 --batch 2 --warmup "$WARMUP" --iters "$ITERS" \
				--json "$RESULTS/torch_${mode}_${d}_${f}.json" >"$RESULTS/torch_${mode}_${d}_${f}.txt" 2>&1
			echo $? >"$RESULTS/torch_${mode}_${d}_${f}.rc"
			tail -3 "$RESULTS/torch_${mode}_${d}_${f}.txt"
		done
	done
}

phase_torch() {
	log "matmul peak"
	"$PY" scripts/gpu/matmul_peak.py --json "$RESULTS/peak.json" 2>&1 | tail -3
	torch_phase eager "$TORCH_DTYPES"
}

phase_compile() { torch_phase compile "$COMPILE_DTYPES"; }

phase_multi() {
	for n in $NPROCS; do
		log "vdpp bench --model svd --nproc $n"
		MEMFILE="$RESULTS/multi_$n.mem" gpu_mem_peak \
			"$VDPP" bench --model "$GOLDEN" --backend "$BACKEND" --nproc "$n" \
			--total-steps 8 --num-samples 8 --warmup-samples 2 --json "$RESULTS/multi_$n.json" \
			>"$RESULTS/multi_$n.txt" 2>&1
		echo $? >"$RESULTS/multi_$n.rc"
		tail -5 "$RESULTS/multi_$n.txt"
	done
}

phase_table() {
	"$PY" scripts/gpu/table.py "$RESULTS" >"$RESULTS/results.md"
	cat "$RESULTS/results.md"
}

copy_out() {
	[[ -n "${OUT:-}" ]] || return 0
	# Up to 8 files come back: pack the small ones into one archive.
	tar -czf "$OUT/results.tgz" -C "$RESULTS" . 2>/dev/null
	[[ -f "$RESULTS/results.md" ]] && cp "$RESULTS/results.md" "$OUT/"
	cp "$RESULTS/log.txt" "$OUT/" 2>/dev/null
	return 0
}

[[ $# -gt 0 ]] || set -- all
[[ "$1" == all ]] && set -- env parity go torch compile multi table
for p in "$@"; do
	case $p in
	env | parity | go | torch | compile | multi | table) "phase_$p" ;;
	*)
		echo "unknown phase $p" >&2
		exit 2
		;;
	esac
	copy_out
done
