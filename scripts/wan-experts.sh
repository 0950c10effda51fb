#!/bin/sh
# Experts per stage, measured: a two-expert Wan folder with random weights (each expert about
# 320 MB in float32, scripts/wanmoe), benchmarked as a 2-stage pipeline cut at the expert
# switch (pp=2) and as 2 data-parallel replicas (dp=2), then planned with a memory limit
# that holds one expert but not two. Prints weight bytes per rank, first-sample latency and
# throughput of each (bench JSON under OUT).
# Usage: scripts/wan-experts.sh [OUT [REF_WAN_FOLDER]]
set -eu
cd "$(dirname "$0")/.."
out=${1:-/tmp/wan-experts}
ref=${2:-../shared/golden/wan-dev}
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
[ -f "$out/model/transformer_2/diffusion_pytorch_model.safetensors" ] || go run ./scripts/wanmoe -out "$out/model" -ref "$ref"
common="--model $out/model --total-steps 8 --num-samples 4 --warmup-samples 1 --latent-frames 3 --latent-channels 4 --latent-height 8 --latent-width 8 --guidance-scale 5 --timeout 20m"
for mesh in "pp 2" "dp 2"; do
	set -- $mesh
	"$out/vdpp" bench $common --$1 $2 --no-baseline --json "$out/$1$2.json" >"$out/$1$2.log" 2>&1
done
for mesh in pp2 dp2; do
	/usr/bin/python3 - "$out/$mesh.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w = " | ".join(f"rank {p['rank']}: " + ", ".join(f"{k} {v/1e6:.0f} MB" for k, v in sorted(p.get("weights", {}).items())) for p in r["per_rank"])
print(f"{sys.argv[1]}: stages {r['stage_steps']} first sample {r['first_sample_ms']/1e3:.1f} s, "
      f"steady {r['steady_sample_ms']/1e3:.1f} s/sample, {r['throughput_samples_per_s']:.3f} samples/s | {w}")
PY
done
# One expert plus headroom fits, two do not: the planner marks dp infeasible.
"$out/vdpp" plan --model "$out/model" --devices 2 --total-steps 8 --num-samples 4 --latent-frames 3 --latent-channels 4 \
	--latent-height 8 --latent-width 8 --guidance-scale 5 --memory-per-device 500000000 --measure-processes=false
