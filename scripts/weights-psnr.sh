#!/bin/sh
# The built-in models' videos with their denoiser weights held in each weight type, against
# the same video with float32 weights: `vdpp generate --weights-dtype T` (converted at load,
# the nearest-type rule of docs/weights.md) and scripts/framediff (PSNR over the video, mean
# SSIM of its frames). Prints one line per model and type, with the bytes held per type
# from report.json.
# Usage: scripts/weights-psnr.sh [OUT] [TYPES]   (TYPES: "q8_0 q4_k bf16 f16" by default)
set -eu
cd "$(dirname "$0")/.."
out=${1:-/tmp/weights-psnr}
types=${2:-"q8_0 q4_k bf16 f16"}
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
go build -o "$out/framediff" ./scripts/framediff
run() { # model dtype args...
	m=$1 t=$2
	shift 2
	"$out/vdpp" generate --model "$m" --weights-dtype "$t" --seed 0 --overwrite --out "$out/$m-$t" "$@" >"$out/$m-$t.log" 2>&1
}
held() { # the bytes by type report.json records (one line per stage)
	tr -d ' \n' <"$1/sample-000/report.json" | grep -o '"weight_bytes_by_type":{[^}]*}' | sort -u | tr '\n' ' '
}
compare() { # model args...: the f32 video, then each type's against it
	m=$1
	shift
	run "$m" f32 "$@"
	for t in $types; do
		run "$m" "$t" "$@"
		printf '%s %s: %s %s\n' "$m" "$t" "$("$out/framediff" "$out/$m-f32/sample-000" "$out/$m-$t/sample-000")" "$(held "$out/$m-$t")"
	done
}
compare builtin --image builtin/example.png
compare builtin-wan --prompt "a red fox runs through the snow at dawn"
