#!/bin/sh
# golden.sh GGML_DIR — remake tensor/quant's golden files with ggml's own code.
#
# GGML_DIR is a ggml source tree the user supplies (a clone of github.com/ggml-org/ggml,
# or the ggml submodule of stable-diffusion.cpp; the goldens were made at ggml commit
# 8e800cef2948046cc47f9db6090491c6128ca42c, the one stable-diffusion.cpp pins). The script
# builds ggml's base library (ggml.c, ggml-quants.c: the reference quantizers and the
# dequantizers) and driver.c in a temporary folder, with every float operation rounded on
# its own (-ffp-contract=off: what ggml's baseline x86-64 build does, which has no FMA), and
# runs it on the committed inputs. Nothing of ggml is copied into this repository.
#
# Run from anywhere; `go test ./tensor/quant -update` runs it with GGML_DIR from the
# environment.
set -eu
GGML_DIR=${1:-${GGML_DIR:-}}
if [ -z "$GGML_DIR" ] || [ ! -f "$GGML_DIR/src/ggml-quants.c" ]; then
	echo "usage: $0 GGML_DIR (a ggml source tree with src/ggml-quants.c)" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/../../tensor/quant/testdata
work=$(mktemp -d /tmp/ggmlquant.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake -S "$GGML_DIR" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
	-DCMAKE_C_FLAGS=-ffp-contract=off -DCMAKE_CXX_FLAGS=-ffp-contract=off >"$work/cmake.log"
cmake --build "$work/build" --target ggml-base -j 2 >>"$work/cmake.log"
lib=$(find "$work/build" -name 'libggml-base.a' | head -n 1)
cc -std=c11 -O2 -ffp-contract=off -I"$GGML_DIR/include" -c "$here/driver.c" -o "$work/driver.o"
c++ "$work/driver.o" "$lib" -lm -lpthread -o "$work/driver" # ggml-base has C++ parts
mkdir -p "$work/out"
# ggml type ids and names, as tensor/quant's table declares them.
"$work/driver" "$golden/inputs.f32" 256 "$golden/random.bin" "$work/out" \
	0 f32 1 f16 30 bf16 8 q8_0 2 q4_0 3 q4_1 6 q5_0 7 q5_1 10 q2_K 11 q3_K 12 q4_K 13 q5_K 14 q6_K
mkdir -p "$golden/ggml"
for f in "$work"/out/*.bin; do
	name=$(basename "$f" .bin)
	[ "$name" = f32 ] || cp "$f" "$golden/ggml/$name.bin"
done
(cd "$work/out" && sha256sum *.f32 f32.bin) | sort -k 2 >"$golden/ggml/sha256.txt"
echo "wrote $golden/ggml"
