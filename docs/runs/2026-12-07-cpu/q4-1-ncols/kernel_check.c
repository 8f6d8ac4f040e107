// Patch 0030's kernel against ggml's one-column q4_1 dot product: bit for bit on 576 x 576 random
// weights and 6 columns, and the time of both (one thread). Build from a llama.cpp tree with the
// patches applied (ggml/ as the working directory), linking an engine's libggml-base / libggml-cpu:
//   gcc -O3 -D_GNU_SOURCE -mavx2 -mfma -mf16c -mbmi2 -Iinclude -Isrc -Isrc/ggml-cpu kernel_check.c \
//       src/ggml-cpu/arch/x86/quants.c src/ggml-cpu/quants.c -o kt -L$LIB -lggml-base -lggml-cpu -lm -Wl,-rpath,$LIB
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ggml.h"
#include "quants.h"
#include "ggml-cpu.h"
int main(void) {
    const int n = 576, rows = 576, cols = 6, nb = n / 32;
    float * w = malloc(sizeof(float) * n * rows), * a = malloc(sizeof(float) * n * cols);
    srand(1);
    for (int i = 0; i < n * rows; ++i) w[i] = (rand() / (float) RAND_MAX - 0.5f);
    for (int i = 0; i < n * cols; ++i) a[i] = (rand() / (float) RAND_MAX - 0.5f) * 3;
    block_q4_1 * qw = malloc(sizeof(block_q4_1) * nb * rows);
    block_q8_1 * qa = malloc(sizeof(block_q8_1) * nb * cols);
    quantize_row_q4_1_ref(w, qw, n * rows);
    for (int c = 0; c < cols; ++c) quantize_row_q8_1_ref(a + c * n, qa + c * nb, n);
    float yd[6][64], ys[6][64];
    const void * vys[6]; const float * pd[6]; const float * ps[6];
    for (int c = 0; c < cols; ++c) {
        for (int ib = 0; ib < nb; ++ib) { yd[c][ib] = ggml_fp16_to_fp32(qa[c*nb+ib].d); ys[c][ib] = ggml_fp16_to_fp32(qa[c*nb+ib].s); }
        vys[c] = qa + c * nb; pd[c] = yd[c]; ps[c] = ys[c];
    }
    int bad = 0;
    for (int r = 0; r < rows; ++r) {
        float one[6], many[6];
        for (int c = 0; c < cols; ++c) ggml_vec_dot_q4_1_q8_1(n, &one[c], 0, qw + r * nb, 0, qa + c * nb, 0, 1);
        ggml_vec_dot_q4_1_q8_1_ncols(n, many, qw + r * nb, vys, pd, ps, 4);
        ggml_vec_dot_q4_1_q8_1_ncols(n, many + 4, qw + r * nb, vys + 4, pd + 4, ps + 4, 2);
        for (int c = 0; c < cols; ++c) bad += memcmp(&one[c], &many[c], 4) != 0;
    }
    printf("mismatches %d of %d\n", bad, rows * cols);
    const int reps = 2000; float sink = 0, v[6];
    clock_t t0 = clock();
    for (int k = 0; k < reps; ++k) for (int r = 0; r < rows; ++r) for (int c = 0; c < cols; ++c) { ggml_vec_dot_q4_1_q8_1(n, v, 0, qw + r * nb, 0, qa + c * nb, 0, 1); sink += v[0]; }
    double t1 = (double)(clock() - t0) / CLOCKS_PER_SEC; t0 = clock();
    for (int k = 0; k < reps; ++k) for (int r = 0; r < rows; ++r) { ggml_vec_dot_q4_1_q8_1_ncols(n, v, qw + r * nb, vys, pd, ps, 4); if (6 - 4) ggml_vec_dot_q4_1_q8_1_ncols(n, v + 4, qw + r * nb, vys + 4, pd + 4, ps + 4, 6 - 4); sink += v[0]; }
    double t2 = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("one column at a time %.3f s, ncols %.3f s (%.2fx) %g\n", t1, t2, t1 / t2, sink);
}
