#!/usr/bin/env bash
# cache-svd-builtin.sh: the step caches of SVD's UNet on the built-in model
# (docs/caching.md). For every setting, `vdpp eval` on CLIPS held-out clips, 25 steps:
# each clip is generated cached and then uncached (interleaved), and the report gives the
# cached videos' PSNR and SSIM against the uncached ones and against the truth, the calls
# computed and both denoising times. Two static schedules are calibrated from an fbcache
# run of `vdpp generate` on the bundled image. Then `vdpp generate` on the bundled image,
# 25 steps, uncached and cached alternately, REPEATS rounds: every run's diffusion_ms
# (report.json).
#
#   scripts/cache-svd-builtin.sh [OUT [CLIPS [REPEATS]]]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/cache-svd-builtin}
clips=${2:-16}
repeats=${3:-5}
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
img=$PWD/builtin/example.png

evalrun() {
	local name=$1
	shift
	"$out/vdpp" eval --model builtin --samples "$clips" --steps 25 --untrained=false --recon=false \
		--json "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.log"
	grep -v "repeat frame" "$out/$name.txt"
}
for setting in "deepcache 2 0" "deepcache 3 0" "deepcache 5 0" "deepcache 3 1" "deepcache 3 2"; do
	read -r _ k b <<<"$setting"
	evalrun "deepcache-i$k-b$b" --cache deepcache --cache-interval "$k" --cache-branch "$b"
done
for k in 2 3; do
	evalrun "static-i$k" --cache static --cache-interval "$k"
done
for th in 0.05 0.1 0.2; do
	evalrun "fbcache-$th" --cache fbcache --cache-threshold "$th"
done
for th in 0.05 0.1; do
	rm -rf "$out/calib-$th"
	"$out/vdpp" generate --model builtin --image "$img" --steps 25 --cache fbcache --cache-threshold "$th" \
		--out "$out/calib-$th" >/dev/null 2>&1
	echo "calibration fbcache $th: $(jq -r .cache.computed_steps "$out/calib-$th/sample-000/report.json")"
	evalrun "static-calib-$th" --cache static --cache-steps "$out/calib-$th/sample-000/report.json"
done

settings=("none" "static --cache-steps $out/calib-0.1/sample-000/report.json" "static --cache-interval 3"
	"fbcache --cache-threshold 0.1" "deepcache --cache-interval 5")
for i in $(seq "$repeats"); do
	for s in "${settings[@]}"; do
		dir=$out/generate-$i-$(echo "$s" | tr -c 'a-z0-9.\n' '_')
		rm -rf "$dir"
		# shellcheck disable=SC2086 # the setting is flags
		"$out/vdpp" generate --model builtin --image "$img" --steps 25 --cache $s --out "$dir" >/dev/null 2>&1
		echo "round $i, --cache $s: diffusion_ms $(jq .timings_ms.diffusion_ms "$dir/sample-000/report.json")," \
			"calls computed $(jq '.cache.computed_calls // 50' "$dir/sample-000/report.json") of 50"
	done
done
