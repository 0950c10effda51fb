#!/bin/sh
# serve-rss.sh: resident memory (VmRSS, MB) of `vdpp serve`'s coordinator and workers
# before, during and after a big-but-allowed job on the built-in model, and after a
# cancelled one, with the cancel's latency beside the step time (docs/serve.md, "Cost
# limits"). Loopback only; Linux (/proc).
#
#   [SERVE_ARGS="--max-cost-multiple 64"] [CANCEL_ONLY=1] scripts/serve-rss.sh [PARAMS_JSON]
#
# CANCEL_ONLY skips the full job and measures only the cancel.
# PARAMS_JSON defaults to the largest job the default cost limits admit at 128x128.
set -eu
params=${1:-'{"height":128,"width":128,"num_frames":14,"steps":25}'}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/vdpp" ./cmd/vdpp
"$tmp/vdpp" serve --listen 127.0.0.1:0 --model builtin --nproc 2 --data-dir "$tmp/data" \
	--worker-pid-file "$tmp/pids" ${SERVE_ARGS:-} >"$tmp/out" 2>"$tmp/err" &
pid=$!
until grep -q '^listening on' "$tmp/out" 2>/dev/null; do sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$tmp/out")
until curl -sf "$url/readyz" >/dev/null; do sleep 0.2; done
python3 -c 'import zlib,struct
def c(t,d): return struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d)&0xffffffff)
raw=b"".join(b"\0"+bytes([x*4%256,y*4%256,128]*64) for y in range(64) for x in [0])
open("'"$tmp"'/in.png","wb").write(b"\x89PNG\r\n\x1a\n"+c(b"IHDR",struct.pack(">IIBBBBB",64,64,8,2,0,0,0))+c(b"IDAT",zlib.compress(raw))+c(b"IEND",b""))'
now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }
rss() { awk '/VmRSS/{printf "%d", $2/1024}' /proc/$1/status; }
show() {
	line="$1: coordinator $(rss $pid) MB"
	while read -r rank wpid; do line="$line, worker $rank $(rss $wpid) MB"; done <"$tmp/pids"
	echo "$line"
}
submit() { curl -sf -F image=@"$tmp/in.png" -F "params=$1" "$url/v1/videos" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
state() { curl -sf "$url/v1/videos/$1" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["state"], s["progress"]["step"])'; }
show "before"
if [ -z "${CANCEL_ONLY:-}" ]; then
	id=$(submit "$params")
	peak=""
	while :; do
		set -- $(state "$id")
		[ "$1" = succeeded ] || [ "$1" = failed ] && break
		[ "$1" = running ] && [ "$2" -ge 5 ] && [ -z "$peak" ] && { show "during ($params, step $2)"; peak=1; }
		sleep 0.2
	done
	echo "job $id: $1"
	show "after the job"
	sleep 5
	show "5 s after"
fi
# The cancel: DELETE just after step 4 is reported, so the step in flight (the 5th) has
# just started; the cancel acts at its end, the next step boundary.
id=$(submit "$params")
until set -- $(state "$id") && [ "$1" = running ] && [ "$2" -ge 3 ]; do sleep 0.05; done
t3=$(now)
until set -- $(state "$id") && [ "$2" -ge 4 ]; do sleep 0.05; done
t4=$(now)
curl -sf -X DELETE "$url/v1/videos/$id" >/dev/null
tb=""
until set -- $(state "$id") && [ "$1" = cancelled ]; do
	[ -z "$tb" ] && [ "$2" -ge 5 ] && tb=$(now)
	sleep 0.05
done
t5=$(now)
[ -z "$tb" ] && tb=$t5
mean=$(curl -sf "$url/metrics" | awk '/^vdpp_step_latency_seconds_sum/{s+=$2} /^vdpp_step_latency_seconds_count/{n+=$2} END{printf "%d", s/n*1000}')
echo "cancel: step 3 -> 4 took $(ms $t3 $t4) ms (mean step $mean ms); DELETE after step 4: the step in flight ended $(ms $t4 $tb) ms later, cancelled $(ms $t4 $t5) ms after the DELETE, at step $2"
show "after a cancel at step 4"
sleep 5
show "5 s after the cancel"
