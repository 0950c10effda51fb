#!/usr/bin/env bash
# prepare.sh: on the development machine, put what scripts/gpu-check.sh needs into
# git-ignored folders that travel with the checkout to the GPU machine: .gpu/bin/vdpp
# (built here, linux/amd64), .gpu/golden/dev (a copy of ../shared/golden/dev) and
# third_party_ref/diffusers/src (diffusers' source, from a git mirror such as
# `git clone --mirror https://github.com/huggingface/diffusers`; pipelines pruned to keep
# the copy small).
#
# Usage: scripts/gpu/prepare.sh [DIFFUSERS_GIT_DIR]
#   DIFFUSERS_GIT_DIR (the argument, or the environment variable) is a git clone of diffusers
set -euo pipefail
cd "$(dirname "$0")/../.."
mirror=${1:-${DIFFUSERS_GIT_DIR:?give the diffusers git clone as the argument or in DIFFUSERS_GIT_DIR}}
shared=${VDPP_SHARED:-../shared}

mkdir -p .gpu/bin .gpu/golden
CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags=-s -o .gpu/bin/vdpp ./cmd/vdpp
rm -rf .gpu/golden/dev && cp -r "$shared/golden/dev" .gpu/golden/dev

if [[ ! -d third_party_ref/diffusers/src/diffusers ]]; then
	mkdir -p third_party_ref/diffusers
	git --git-dir="$mirror" archive HEAD src/diffusers | tar -x -C third_party_ref/diffusers
	git --git-dir="$mirror" rev-parse HEAD >third_party_ref/diffusers/COMMIT
fi
# The UNet needs diffusers' models/, utils/ and configuration code, not the pipelines.
find third_party_ref/diffusers/src/diffusers/pipelines third_party_ref/diffusers/src/diffusers/modular_pipelines \
	-mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
{ git check-ignore -q .gpu && git check-ignore -q third_party_ref; } || { echo "prepare: .gpu/ or third_party_ref/ is not git-ignored" >&2; exit 1; }
du -sh .gpu third_party_ref
