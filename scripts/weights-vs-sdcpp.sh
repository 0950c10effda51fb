#!/usr/bin/env bash
# vdpp against stable-diffusion.cpp on the same random Wan 2.1 T2V 1.3B-shaped weights: time
# per denoising step, VAE decode time and peak resident memory of a whole text-to-video run,
# at each weight type, the two programs interleaved.
#
#   scripts/weights-vs-sdcpp.sh /path/to/sd-cli [WORKDIR]
#
# SD_CLI is a stable-diffusion.cpp command-line binary you built (cmake -DGGML_NATIVE=ON;
# this repository holds none of its code). WORKDIR (default /tmp/vdpp-vs-sdcpp) receives the
# model files, written once by scripts/wanheld -write (a 30-layer transformer in Wan's
# original layout, float32, 5.7 GB: sd-cli --diffusion-model and vdpp --transformer read the
# same file; the Wan 2.1 VAE; a one-layer umT5 for sd.cpp, which needs a text encoder, and
# the prompt embeddings vdpp takes instead, 512 rows as sd.cpp's), then every run's output.
#
# Both programs run the same video: 320x192, 9 frames, 2 steps, CFG 5, THREADS threads
# (default 2; vdpp through GOMAXPROCS), flash attention on for sd.cpp, each type converted at
# load from the float32 file (sd-cli --type, vdpp --weights-dtype). TYPES (default
# "f32 f16 q8_0") and ROUNDS (default 1) set the runs; each round runs every type, vdpp then
# sd.cpp. Peak memory is the process's maximum RSS (/usr/bin/time); the step time is the
# denoising time over the steps, the decode time the VAE decode's (vdpp's report.json,
# sd.cpp's log; sd.cpp loads a model's weights when it first runs it, so the loading times
# its log gives inside its sampling and its decode are taken out of them); CPU s is the whole
# process's user and system time, which a loaded machine inflates less than the wall times.
# The table goes to stdout and WORKDIR/results.md, with the CPU and the load.
set -euo pipefail
sd=${1:?usage: scripts/weights-vs-sdcpp.sh /path/to/sd-cli [WORKDIR]}
work=${2:-/tmp/vdpp-vs-sdcpp}
types=${TYPES:-f32 f16 q8_0}
rounds=${ROUNDS:-1}
threads=${THREADS:-2}
steps=2
[ -x "$sd" ] || { echo "weights-vs-sdcpp: $sd is not an executable" >&2; exit 1; }
cd "$(dirname "$0")/.."
mkdir -p "$work"
go build -o "$work/vdpp" ./cmd/vdpp
go build -o "$work/wanheld" ./scripts/wanheld
files=$work/files
model=$files/wan2.1_t2v_1.3B_random.safetensors
[ -f "$files/done" ] || { "$work/wanheld" -write "$files" && touch "$files/done"; }

rss() { awk 'END{printf "%.2f", $1/1048576}' "$1"; } # KB -> GB
cpu() { awk 'END{printf "%.0f", $2+$3}' "$1"; }      # user + system seconds

run_vdpp() { # type round
  local out=$work/vdpp-$1-$2
  rm -rf "$out"
  GOMAXPROCS=$threads /usr/bin/time -f "%M %U %S" -o "$out.rss" "$work/vdpp" generate --model "$files/wan" \
    --transformer "$model" --weights-dtype "$1" \
    --prompt-embeds "$files/prompt_embeds.safetensors" --negative-prompt-embeds "$files/negative_prompt_embeds.safetensors" \
    --width 320 --height 192 --num-frames 9 --steps $steps --guidance-scale 5 --seed 1 --out "$out" --quiet
  python3 - "$out/sample-000/report.json" "$out.rss" "$1" $steps >>"$work/rows.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); t = r["timings_ms"]
kb, user, system = open(sys.argv[2]).read().split()[-3:]
print("vdpp %s %.1f %.1f %.2f %.0f" % (sys.argv[3], t["diffusion_ms"] / 1000 / int(sys.argv[4]), t["decode_ms"] / 1000, int(kb) / 1048576, float(user) + float(system)))
EOF
}

run_sdcpp() { # type round
  local out=$work/sdcpp-$1-$2
  /usr/bin/time -f "%M %U %S" -o "$out.rss" "$sd" -M vid_gen --diffusion-model "$model" \
    --vae "$files/wan/vae/diffusion_pytorch_model.safetensors" --t5xxl "$files/umt5_tiny.safetensors" \
    -p "a red fox runs through the snow" --cfg-scale 5 --steps $steps -W 320 -H 192 --video-frames 9 \
    -t "$threads" --diffusion-fa --type "$1" --seed 1 -o "$out.avi" >"$out.log" 2>&1
  # The loading times logged after generate_video and before "sampling completed" are the
  # diffusion model's, loaded by its first step; those before "decode_first_stage
  # completed" the VAE's.
  python3 - "$out.log" $steps >"$out.times" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
phase, load, sampling, decode = None, {"s": 0.0, "d": 0.0}, None, None
for m in re.finditer(r"generate_video|loading tensors completed, taking ([0-9.]+)s|sampling completed, taking ([0-9.]+)s|decode_first_stage completed, taking ([0-9.]+)s", text):
    if m.group(0) == "generate_video":
        phase = "s"
    elif m.group(1) and phase:
        load[phase] += float(m.group(1))
    elif m.group(2):
        sampling, phase = float(m.group(2)), "d"
    elif m.group(3):
        decode, phase = float(m.group(3)), None
if sampling is None or decode is None:
    sys.exit("weights-vs-sdcpp: %s has no sampling or decode time" % sys.argv[1])
print("%.1f %.1f" % ((sampling - load["s"]) / int(sys.argv[2]), decode - load["d"]))
EOF
  echo "sdcpp $1 $(cat "$out.times") $(rss "$out.rss") $(cpu "$out.rss")" >>"$work/rows.txt"
}

: >"$work/rows.txt"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
  for t in $types; do
    run_vdpp "$t" "$round"
    run_sdcpp "$t" "$round"
  done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; $threads threads;" \
    "load average $load0 at the start, $load1 at the end"
  echo
  echo "| program | type | s / step | decode s | peak RSS GB | CPU s |"
  echo "|:--|:--|--:|--:|--:|--:|"
  awk '{printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6}' "$work/rows.txt"
} | tee "$work/results.md"
