#!/usr/bin/env bash
# cache-wan-speedup.sh: First Block Cache on a larger random Wan 2.2 two-expert folder
# (scripts/wanmoe: 20 blocks of 8 x 64 heads, ffn 1536, text_dim 32, so wan-dev-cache's
# prompt embeddings fit), at wan-dev-cache's threshold. It runs `vdpp generate` cached and
# uncached, interleaved, REPEATS times each, and prints every run's diffusion_ms
# (report.json), the calls computed, and the cached frames' PSNR and SSIM against the
# uncached frames (scripts/framediff).
#
#   scripts/cache-wan-speedup.sh [OUT [REPEATS [EXTRA GENERATE FLAGS...]]]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/cache-wan-speedup}
repeats=${2:-3}
shift $(($# > 2 ? 2 : $#))
shared=${SHARED:-../shared}
[ -d "$shared" ] || shared=../../shared # a git worktree one level deeper
golden=$shared/golden/wan-dev-cache
embeds=$golden/cases/full_pipeline_fbcache/inputs.safetensors
threshold=$(jq -r .args.threshold "$golden/cases/full_pipeline_fbcache/case.json")
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
[ -f "$out/model/transformer_2/diffusion_pytorch_model.safetensors" ] ||
	go run ./scripts/wanmoe -out "$out/model" -ref "$shared/golden/wan-dev" -heads 8 -head-dim 64 -layers 20 -ffn 1536 -text-dim 32
common=(--model "$out/model" --prompt-embeds "$embeds" --negative-prompt-embeds "$embeds" --num-frames 9 --height 128 --width 128
	--steps 16 --guidance-scale 4 --guidance-scale-2 3 --progress plain "$@")
for i in $(seq "$repeats"); do
	for mode in fbcache none; do
		dir=$out/$mode-$i
		rm -rf "$dir"
		"$out/vdpp" generate "${common[@]}" --cache "$mode" --cache-threshold "$threshold" --out "$dir" >/dev/null 2>"$out/$mode-$i.log"
		jq -r --arg run "$mode $i" '"\($run): diffusion_ms \(.timings_ms.diffusion_ms) calls computed \(if .cache then "\(.cache.computed_calls) of \(.cache.total_calls) (steps \(.cache.computed_steps))" else "all" end)"' "$dir/sample-000/report.json"
	done
done
go run ./scripts/framediff "$out/none-1/sample-000" "$out/fbcache-1/sample-000"
