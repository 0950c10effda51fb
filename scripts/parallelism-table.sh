#!/usr/bin/env bash
# parallelism-table.sh: the planner's predictions against measured runs, one row per mesh.
#
#   scripts/parallelism-table.sh [-b VDPP] MESH... [-- WORKLOAD FLAGS...]
#
# MESH is pp,cfg,cp,dp (e.g. 7,1,1,1 or 1,2,1,2). WORKLOAD FLAGS go to both `vdpp plan` and
# `vdpp bench` (--model, --step-ms, --total-steps, --num-samples, --latent-*,
# --guidance-scale, --micro-batch). PLAN_FLAGS and BENCH_FLAGS (environment) add flags to
# one side only, e.g. PLAN_FLAGS="--calibration cal.json" BENCH_FLAGS="--warmup-samples 4".
# For each mesh it runs `vdpp plan --devices pp*cfg*cp*dp --json` and `vdpp bench --pp ..
# --cfg .. --cp .. --dp .. --json` (a pure pipeline falls back to `--nproc pp` when bench
# has no --pp flag) and prints a Markdown table of predicted vs measured first-sample
# latency and throughput, with the relative error of each prediction.
set -euo pipefail

vdpp=${VDPP:-}
if [[ ${1:-} == -b ]]; then vdpp=$2; shift 2; fi
if [[ -z $vdpp ]]; then
	vdpp=$(mktemp -d)/vdpp
	go build -o "$vdpp" ./cmd/vdpp
fi
meshes=()
while [[ $# -gt 0 && $1 != -- ]]; do meshes+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
workload=("$@")
[[ ${#meshes[@]} -gt 0 ]] || { echo "usage: $0 [-b VDPP] PP,CFG,CP,DP... [-- FLAGS]" >&2; exit 2; }
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has_mesh_flags=0
# bench -h exits non-zero; read its help first (pipefail would hide a match).
bench_help=$("$vdpp" bench -h 2>&1 || true)
[[ $bench_help == *"-pp int"* ]] && has_mesh_flags=1

echo "| mesh | predicted first (ms) | measured first (ms) | error | predicted throughput (/s) | measured throughput (/s) | error |"
echo "|:---|---:|---:|---:|---:|---:|---:|"
for m in "${meshes[@]}"; do
	IFS=, read -r pp cfg cp dp <<<"$m"
	devices=$((pp * cfg * cp * dp))
	# shellcheck disable=SC2086
	"$vdpp" plan --devices "$devices" --json "$tmp/plan.json" "${workload[@]}" ${PLAN_FLAGS:-} >/dev/null
	pred=$(jq -c --argjson pp "$pp" --argjson cfg "$cfg" --argjson cp "$cp" --argjson dp "$dp" \
		'[.configs[], .infeasible[]] | map(select(.pp==$pp and .cfg==$cfg and .cp==$cp and .dp==$dp)) | first' "$tmp/plan.json")
	if [[ $pred == null ]]; then
		echo "| pp=$pp cfg=$cfg cp=$cp dp=$dp | (not a mesh for this workload) | | | | | |"
		continue
	fi
	if [[ $has_mesh_flags == 1 ]]; then
		mesh_flags=(--pp "$pp" --cfg "$cfg" --cp "$cp" --dp "$dp")
	elif [[ $cfg == 1 && $cp == 1 && $dp == 1 ]]; then
		mesh_flags=(--nproc "$pp")
	else
		echo "| pp=$pp cfg=$cfg cp=$cp dp=$dp | $(jq -r '.predicted_first_sample_ms' <<<"$pred") | (bench has no --pp/--cfg/--cp/--dp) | | | | |"
		continue
	fi
	# shellcheck disable=SC2086
	"$vdpp" bench "${mesh_flags[@]}" --json "$tmp/bench.json" "${workload[@]}" ${BENCH_FLAGS:-} >/dev/null 2>"$tmp/bench.err" ||
		{ echo "$0: bench $m failed:" >&2; cat "$tmp/bench.err" >&2; exit 1; }
	jq -r --argjson p "$pred" --arg mesh "pp=$pp cfg=$cfg cp=$cp dp=$dp" '
		def err(a; b): if b == 0 then "-" else (((a - b) / b * 1000 | round) / 10 | tostring) + " %" end;
		def f(x): (x * 100 | round) / 100 | tostring;
		"| \($mesh) | \(f($p.predicted_first_sample_ms)) | \(f(.first_sample_ms)) | \(err($p.predicted_first_sample_ms; .first_sample_ms)) | \(f($p.predicted_throughput_samples_per_s)) | \(f(.throughput_samples_per_s)) | \(err($p.predicted_throughput_samples_per_s; .throughput_samples_per_s)) |"
	' "$tmp/bench.json"
done
