#!/bin/sh
# vdpp's network calls built at several commits, side by side in one run (see
# scripts/cpuvstorch/commits.py for what is measured): the way to show that a change left
# the speed where it was. Each commit's scripts/cpuvstorch helper is built from a
# `git archive` of it (so the commit needs that helper), the cases are written once by
# this checkout's scripts/cpuvstorch/compare.py. Needs what scripts/cpu-vs-torch.sh needs
# (/usr/bin/python3 with torch and numpy, DIFFUSERS_GIT_DIR or DIFFUSERS_SRC).
#
# Usage: scripts/cpu-vs-commits.sh [--cases a,c] [--rounds 6] [--calls 3] [--threads 2] [--json FILE] -- REV...
#   e.g. scripts/cpu-vs-commits.sh --cases a,c -- 90a7d97^ 90a7d97 HEAD
set -eu
cd "$(dirname "$0")/.."
args=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	args="$args $1"
	shift
done
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [compare options] -- REV..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
builds=""
i=0
for rev in "$@"; do
	i=$((i + 1))
	src="$tmp/src$i"
	mkdir -p "$src"
	git archive "$rev" | tar -x -C "$src"
	(cd "$src" && go build -o "$tmp/helper$i" ./scripts/cpuvstorch)
	builds="$builds --build $rev@$(git rev-parse --short "$rev")=$tmp/helper$i"
	rm -rf "$src"
done
# shellcheck disable=SC2086 # the options are words
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} /usr/bin/python3 scripts/cpuvstorch/commits.py $builds $args
