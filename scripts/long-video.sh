#!/usr/bin/env bash
# Long videos on the built-in model (docs/long-video.md): peak RSS of one `vdpp generate`
# process for 14, 56, 112 and 224 frames, then quality against the procedural ground truth
# (PSNR by horizon, repeat-first baseline, seam measure) for overlapping cosine and linear
# windows, naive cuts (no overlap) and windows continued from the previous window's last
# frame. Usage: scripts/long-video.sh [OUT] (default out/long-video).
set -euo pipefail
out=${1:-out/long-video}
steps=${STEPS:-10}
mkdir -p "$out"
go build -o "$out/vdpp" ./cmd/vdpp
go build -o "$out/longvideo" ./scripts/longvideo
"$out/vdpp" data --out "$out/data" --num-samples 1 >/dev/null
img=$(find "$out/data" -name '000.png' | sort | head -1)
for n in 14 56 112 224; do
  /usr/bin/time -v "$out/vdpp" generate --model builtin --image "$img" --num-frames "$n" --steps "$steps" \
    --out "$out/gen-$n" --progress plain 2>"$out/time-$n.txt" >/dev/null
  rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$out/time-$n.txt")
  wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$out/time-$n.txt")
  echo "{\"frames\": $n, \"peak_rss_kb\": $rss, \"wall\": \"$wall\"}"
done
clips=${CLIPS:-3}
"$out/longvideo" --frames 112 --clips "$clips" --steps "$steps" --window 14 --overlap 3 --blend cosine --name cosine-o3 --out "$out/q"
"$out/longvideo" --frames 112 --clips "$clips" --steps "$steps" --window 14 --overlap 3 --blend linear --name linear-o3 --out "$out/q"
"$out/longvideo" --frames 112 --clips "$clips" --steps "$steps" --window 14 --overlap 0 --blend cosine --name naive-cuts --out "$out/q"
"$out/longvideo" --method continue --frames 112 --clips "$clips" --steps "$steps" --window 14 --name continue --out "$out/q"
