#!/usr/bin/env bash
# What the README's test command costs: wall time, CPU time and peak memory of the whole
# command, and the slowest packages. It runs the command exactly as .ci/run extracts it from
# README.md (CI's environment: GOMLX_BACKEND=go, VDPP_REQUIRE_E2E=1, VDPP_DOCS_HEAVY=1), in a
# memory cgroup of its own when it can make one (root, cgroup v1 or v2): the peak is the
# cgroup's anonymous memory (every test binary, vdpp subprocess, node and chromium together;
# the page cache of the build and the pages of memory-mapped weight files are not counted),
# sampled every second. It also reports the peak of the summed resident memory (VmRSS, which
# counts mapped file pages too) of every process of the command's session.
# Usage: scripts/test-budget.sh [PACKAGES...]   (default ./..., as the README runs it)
# Run it on a fresh clone with a warm or cold build cache, on an otherwise idle machine;
# GOFLAGS=-count=1 in the environment keeps go test from reusing cached results.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOMLX_BACKEND=go VDPP_REQUIRE_E2E=1 VDPP_DOCS_HEAVY=1
test_cmd=$(awk '/^```/{n++; next} n==1' README.md | grep -m1 'go test' | sed 's/[[:space:]]*#.*$//')
if [ $# -gt 0 ]; then
	test_cmd="${test_cmd% ./...} $*"
fi
log=$(mktemp)
peak_file=$(mktemp)
times_file=$(mktemp)
# The inner shell's `times` reports the CPU time of everything the command waited for.
inner="$test_cmd; rc=\$?; times >$times_file; exit \$rc"
rss_peak_file=$(mktemp)
at_peak=$(mktemp)
echo 0 >"$peak_file"
echo 0 >"$rss_peak_file"

cg=""
if [ -w /sys/fs/cgroup/memory ]; then
	cg=/sys/fs/cgroup/memory/vdpp-test-budget.$$
	mkdir "$cg"
	sample() { awk '$1=="total_rss"||$1=="total_shmem"{s+=$2} END{printf "%.0f\n", s}' "$cg/memory.stat"; }
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] || [ -w /sys/fs/cgroup/unified ]; then
	root=/sys/fs/cgroup
	[ -d /sys/fs/cgroup/unified ] && root=/sys/fs/cgroup/unified
	cg=$root/vdpp-test-budget.$$
	mkdir "$cg"
	sample() { awk '$1=="anon"||$1=="shmem"{s+=$2} END{printf "%.0f\n", s}' "$cg/memory.stat"; }
fi

echo "== $test_cmd"
echo "   $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
if [ -n "$cg" ]; then
	# The subshell joins the cgroup before it starts the command, so every process the
	# command starts is counted.
	(echo $BASHPID >"$cg/cgroup.procs"; exec setsid bash -c "$inner") >"$log" 2>&1 &
else
	setsid bash -c "$inner" >"$log" 2>&1 &
	sample() { echo 0; }
fi
cmd_pid=$!
sample_rss() { { ps -o rss= -s "$cmd_pid" 2>/dev/null || true; } | awk '{s+=$1*1024} END{printf "%.0f\n", s}'; }
while kill -0 "$cmd_pid" 2>/dev/null; do
	now=$(sample || echo 0)
	if [ "${now:-0}" -gt "$(cat "$peak_file")" ]; then
		echo "$now" >"$peak_file"
		# What ran at the peak: the largest processes and the packages' test binaries.
		{ date -u +%T; ps -o rss=,args= -s "$cmd_pid" --sort=-rss 2>/dev/null | head -6 | cut -c1-160; } >"$at_peak" || true
	fi
	now=$(sample_rss || echo 0)
	if [ "${now:-0}" -gt "$(cat "$rss_peak_file")" ]; then echo "$now" >"$rss_peak_file"; fi
	sleep 1 # a sampling period, not an ordering: the loop ends when the command does
done
set +e
wait "$cmd_pid"
rc=$?
set -e
end=$(date +%s.%N)
[ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true

grep -E '^(FAIL|---|panic)' "$log" | head -20 || true
echo "== slowest packages"
grep -E '^ok ' "$log" | awk '{print $3, $2}' | sort -t' ' -k1,1 -rn | head -8
# times' second line: the children's user and system time, as 1m2.5s.
cpu=$(sed -n 2p "$times_file" | tr 'ms' '  ' | awk '{print $1*60+$2 + $3*60+$4}')
awk -v s="$start" -v e="$end" -v c="${cpu:-0}" -v p="$(cat "$peak_file")" -v r="$(cat "$rss_peak_file")" -v g="$cg" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN{
	printf "== wall %.0f s (%.1f min), CPU %.0f s; load after: %s\n", e-s, (e-s)/60, c, l
	if (g != "") printf "== peak anonymous memory (cgroup) %.2f GB\n", p/1e9
	else printf "== peak anonymous memory: no cgroup could be made\n"
	printf "== peak summed resident memory (VmRSS, mapped files included) %.2f GB\n", r/1e9 }'
if [ -s "$at_peak" ]; then echo "== at the peak (RSS KiB, command)"; sed 's/^/   /' "$at_peak"; fi
echo "== exit $rc"
rm -f "$log" "$peak_file" "$rss_peak_file" "$at_peak" "$times_file"
exit "$rc"
