#!/usr/bin/env bash
# cache-plan-table.sh: the planner's predictions for a static step cache against measured
# runs, one row per mesh.
#
#   scripts/cache-plan-table.sh [-b VDPP] MESH... [-- WORKLOAD AND CACHE FLAGS...]
#
# MESH is pp,cfg,cp,dp. The flags after -- go to both `vdpp plan` and `vdpp bench` (the
# workload as in scripts/parallelism-table.sh, and --cache static|deepcache with its
# flags). PLAN_FLAGS and BENCH_FLAGS (environment) add flags to one side only. For each
# mesh it runs `vdpp plan --devices pp*cfg*cp*dp --json` and `vdpp bench --pp .. --cfg ..
# --cp .. --dp .. --json` (which runs the mesh cached, then uncached) and prints a Markdown
# table: the cached run's first-sample latency and steady ms per sample, predicted against
# measured, and the cache's speedup on each (uncached over cached), predicted against
# measured.
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
echo "| mesh | stages | first (ms) predicted / measured | error | steady (ms/sample) predicted / measured | error | cache speedup, steady: predicted / measured | cache speedup, first sample: predicted / measured |"
echo "|:---|:---|---:|---:|---:|---:|---:|---:|"
for m in "${meshes[@]}"; do
	IFS=, read -r pp cfg cp dp <<<"$m"
	devices=$((pp * cfg * cp * dp))
	# shellcheck disable=SC2086
	"$vdpp" plan --devices "$devices" --json "$tmp/plan.json" "${workload[@]}" ${PLAN_FLAGS:-} >/dev/null
	pred=$(jq -c --argjson pp "$pp" --argjson cfg "$cfg" --argjson cp "$cp" --argjson dp "$dp" \
		'[.configs[], .infeasible[]] | map(select(.pp==$pp and .cfg==$cfg and .cp==$cp and .dp==$dp)) | first' "$tmp/plan.json")
	if [[ $pred == null ]]; then
		echo "| pp=$pp cfg=$cfg cp=$cp dp=$dp | (not a mesh for this workload) | | | | | | |"
		continue
	fi
	# shellcheck disable=SC2086
	"$vdpp" bench --pp "$pp" --cfg "$cfg" --cp "$cp" --dp "$dp" --json "$tmp/bench.json" "${workload[@]}" ${BENCH_FLAGS:-} >/dev/null 2>"$tmp/bench.err" ||
		{ echo "$0: bench $m failed:" >&2; cat "$tmp/bench.err" >&2; exit 1; }
	jq -r --argjson p "$pred" --arg mesh "pp=$pp cfg=$cfg cp=$cp dp=$dp" '
		def err(a; b): if b == 0 then "-" else (((a - b) / b * 1000 | round) / 10 | tostring) + " %" end;
		def f(x): (x * 100 | round) / 100 | tostring;
		def stages(s): s | map("\(.[0])-\(.[1] - 1)") | join(", ");
		(if stages($p.stage_steps) == stages(.stage_steps | unique) then stages($p.stage_steps) else "planned \(stages($p.stage_steps)), ran \(stages(.stage_steps | unique))" end) as $st |
		"| \($mesh) | \($st) | \(f($p.predicted_first_sample_ms)) / \(f(.first_sample_ms)) | \(err($p.predicted_first_sample_ms; .first_sample_ms)) | \(f($p.predicted_steady_sample_ms)) / \(f(.steady_sample_ms)) | \(err($p.predicted_steady_sample_ms; .steady_sample_ms)) | \(f($p.predicted_cache_speedup))× / \(f(.cache_speedup))× | \(f($p.predicted_cache_latency_speedup))× / \(f(.cache_first_sample_speedup))× |"
	' "$tmp/bench.json"
done
