// driver.c runs ggml's own quantization code (ggml_quantize_chunk, which calls the
// quantize_row_*_ref reference quantizers when no importance matrix is given, and the type
// traits' to_float, the dequantize_row_* functions) on tensor/quant's committed golden
// inputs. golden.sh builds it against a ggml checkout the user supplies.
//
//   driver INPUTS.f32 N_PER_ROW RANDOM.bin OUTDIR TYPE_ID NAME [TYPE_ID NAME ...]
//
// For each type it writes OUTDIR/NAME.bin (the inputs quantized row by row),
// OUTDIR/NAME.dequant.f32 (those bytes dequantized) and OUTDIR/NAME.random.f32 (the
// longest whole number of blocks of RANDOM.bin dequantized).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(len > 0 ? len : 1);
    if (fread(buf, 1, len, f) != (size_t)len) { perror(path); exit(1); }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void spill(const char *dir, const char *name, const char *ext, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(1); }
}

// to_float is the type's to_float; f32 has none in ggml's traits (it is a copy).
static void to_float(enum ggml_type t, const struct ggml_type_traits *tr, const void *src, float *dst, int64_t n) {
    if (t == GGML_TYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    if (!tr->to_float) { fprintf(stderr, "%s has no to_float\n", tr->type_name); exit(1); }
    tr->to_float(src, dst, n);
}

int main(int argc, char **argv) {
    if (argc < 7 || (argc - 5) % 2 != 0) {
        fprintf(stderr, "usage: driver INPUTS.f32 N_PER_ROW RANDOM.bin OUTDIR TYPE_ID NAME ...\n");
        return 2;
    }
    size_t nin, nrand;
    float *in = slurp(argv[1], &nin);
    int64_t per_row = atoll(argv[2]);
    unsigned char *rnd = slurp(argv[3], &nrand);
    const char *out = argv[4];
    int64_t n = (int64_t)(nin / sizeof(float));
    int64_t nrows = n / per_row;
    for (int a = 5; a < argc; a += 2) {
        enum ggml_type t = (enum ggml_type)atoi(argv[a]);
        const char *name = argv[a + 1];
        const struct ggml_type_traits *tr = ggml_get_type_traits(t);
        size_t row = ggml_row_size(t, per_row);
        void *q = malloc(row * nrows);
        size_t got = ggml_quantize_chunk(t, in, q, 0, nrows, per_row, NULL);
        if (got != row * nrows) { fprintf(stderr, "%s: %zu bytes, want %zu\n", name, got, row * nrows); return 1; }
        spill(out, name, ".bin", q, got);
        float *deq = malloc(n * sizeof(float));
        to_float(t, tr, q, deq, n);
        spill(out, name, ".dequant.f32", deq, n * sizeof(float));
        int64_t nblocks = (int64_t)(nrand / tr->type_size);
        int64_t nr = nblocks * tr->blck_size;
        float *rdeq = malloc((nr > 0 ? nr : 1) * sizeof(float));
        to_float(t, tr, rnd, rdeq, nr);
        spill(out, name, ".random.f32", rdeq, nr * sizeof(float));
        free(q); free(deq); free(rdeq);
    }
    return 0;
}
