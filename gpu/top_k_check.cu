// Patch 0024's top-k kernel (k_top_k_small) checked and timed on its own, on the GPU machine:
// every case's column ids against a host reference (a stable sort by value, descending, NaN read as
// -inf), then the kernel's time against the sort it replaces there (CUB's segmented radix sort of
// every row, as ggml's top-k runs it without CCCL 3.2's DeviceTopK, plus the 2D copy of the first
// k columns), at the drafter block's shapes. With patch 0025 (top_k_small_launch: a row cut into
// parts over more of the GPU, then merged) both ways are checked and timed: one block a row (0024)
// and the parts. The kernels are not copied here: gpu/gpu_top_k_check.sh cuts them out of a
// patched top-k.cu into top_k_small.inc and builds this file against it.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <cub/cub.cuh>

#define WARP_SIZE 32
#include "top_k_small.inc"

// the op's launch: one block a row (nsplit 1), or the row cut into nsplit parts and merged
static void launch(const float * dx, int * dd, float * pv, int * pi, int ncols, int nrows, int k, int nsplit,
                   cudaStream_t s) {
#ifdef TOPK_SMALL_LAUNCH
    top_k_small_launch(dx, dd, pv, pi, ncols, nrows, k, nsplit, s);
#else
    (void) pv;
    (void) pi;
    (void) nsplit;
    k_top_k_small<<<nrows, TOPK_SMALL_WARPS * WARP_SIZE, 0, s>>>(dx, dd, ncols, k);
#endif
}

// the parts the op would cut a row into on this GPU (1 before patch 0025)
static int parts(int ncols, int nrows) {
#ifdef TOPK_SMALL_LAUNCH
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    return top_k_small_parts(ncols, nrows, prop.multiProcessorCount);
#else
    (void) ncols;
    (void) nrows;
    return 1;
#endif
}

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

// the host's k best of one row: a stable sort by value, descending (NaN as -inf), ties to the lower id
static std::vector<int> reference(const float * row, int ncols, int k) {
    std::vector<int> ids(ncols);
    std::iota(ids.begin(), ids.end(), 0);
    auto val = [&](int i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return val(a) > val(b); });
    ids.resize(k);
    return ids;
}

// values of one case: "normal" (distinct), "ties" (a few small integers), "inf" (all -inf but a
// few, fewer than k), "nan" (NaN sprinkled), "sorted" (ascending: every batch beats the list)
static void fill(std::vector<float> & x, const char * kind, std::mt19937 & rng) {
    std::normal_distribution<float> nd(0.f, 3.f);
    std::uniform_int_distribution<int> few(-3, 3);
    for (size_t i = 0; i < x.size(); ++i) {
        if (!strcmp(kind, "ties")) {
            x[i] = (float) few(rng);
        } else if (!strcmp(kind, "inf")) {
            x[i] = rng() % 4096 == 0 ? nd(rng) : -INFINITY;
        } else if (!strcmp(kind, "nan")) {
            x[i] = rng() % 7 == 0 ? NAN : nd(rng);
        } else if (!strcmp(kind, "sorted")) {
            x[i] = (float) i;
        } else {
            x[i] = nd(rng);
        }
    }
}

static int check_case(int nrows, int ncols, int k, const char * kind, std::mt19937 & rng) {
    std::vector<float> x((size_t) nrows * ncols);
    fill(x, kind, rng);
    std::vector<std::vector<int>> want(nrows);
    for (int r = 0; r < nrows; ++r) {
        want[r] = reference(x.data() + (size_t) r * ncols, ncols, k);
    }
    const int np = parts(ncols, nrows);
    float *   dx, *pv;
    int *     dd, *pi;
    CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
    CHECK(cudaMalloc(&dd, (size_t) nrows * k * sizeof(int)));
    CHECK(cudaMalloc(&pv, (size_t) nrows * np * 32 * sizeof(float)));
    CHECK(cudaMalloc(&pi, (size_t) nrows * np * 32 * sizeof(int)));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    int bad = 0;
    for (int nsplit : { 1, np }) {
        // ids left by the way before must not pass for this one's
        CHECK(cudaMemset(dd, 0xff, (size_t) nrows * k * sizeof(int)));
        launch(dx, dd, pv, pi, ncols, nrows, k, nsplit, 0);
        CHECK(cudaGetLastError());
        std::vector<int> got((size_t) nrows * k);
        CHECK(cudaMemcpy(got.data(), dd, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
        for (int r = 0; r < nrows; ++r) {
            for (int j = 0; j < k; ++j) {
                if (got[(size_t) r * k + j] != want[r][j]) {
                    if (bad < 3) {
                        fprintf(stderr, "  %s rows %d cols %d k %d parts %d: row %d slot %d got %d want %d\n", kind,
                                nrows, ncols, k, nsplit, r, j, got[(size_t) r * k + j], want[r][j]);
                    }
                    ++bad;
                    break;
                }
            }
        }
        if (np == 1) {
            break;
        }
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dd));
    CHECK(cudaFree(pv));
    CHECK(cudaFree(pi));
    printf("check %-6s rows %2d cols %6d k %2d (parts 1, %d): %s\n", kind, nrows, ncols, k, np, bad ? "FAIL" : "ok");
    return bad ? 1 : 0;
}

__global__ void k_iota_rows(int * ids, int ncols, int nrows) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < ncols * nrows) {
        ids[i] = i % ncols;
    }
}

// microseconds per call, the mean of `iters` launches captured in one CUDA graph (as the drafter's
// graph replays them): the segmented radix sort + the 2D copy of k columns, the kernel with one
// block a row, and (patch 0025) the row in parts and their merge
static void time_case(int nrows, int ncols, int k, int iters, std::mt19937 & rng) {
    std::vector<float> x((size_t) nrows * ncols);
    fill(x, "normal", rng);
    const size_t n = x.size();
    float *dx, *keys_out;
    int *  dd, *ids_in, *ids_out, *offs;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&keys_out, n * sizeof(float)));
    CHECK(cudaMalloc(&dd, (size_t) nrows * k * sizeof(int)));
    CHECK(cudaMalloc(&ids_in, n * sizeof(int)));
    CHECK(cudaMalloc(&ids_out, n * sizeof(int)));
    CHECK(cudaMalloc(&offs, (nrows + 1) * sizeof(int)));
    std::vector<int> ho(nrows + 1);
    for (int r = 0; r <= nrows; ++r) {
        ho[r] = r * ncols;
    }
    CHECK(cudaMemcpy(offs, ho.data(), ho.size() * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    size_t tmp_bytes = 0;
    CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, tmp_bytes, dx, keys_out, ids_in, ids_out, (int) n,
                                                             nrows, offs, offs + 1));
    void * tmp;
    CHECK(cudaMalloc(&tmp, tmp_bytes));
    const int np = parts(ncols, nrows);
    float *   pv;
    int *     pi;
    CHECK(cudaMalloc(&pv, (size_t) nrows * np * 32 * sizeof(float)));
    CHECK(cudaMalloc(&pi, (size_t) nrows * np * 32 * sizeof(int)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float us[3] = { 0.f, 0.f, 0.f };
    for (int side = 0; side < (np > 1 ? 3 : 2); ++side) {
        cudaGraph_t     g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int it = 0; it < iters; ++it) {
            if (side == 0) {
                k_iota_rows<<<(unsigned) ((n + 255) / 256), 256, 0, s>>>(ids_in, ncols, nrows);
                CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(tmp, tmp_bytes, dx, keys_out, ids_in, ids_out,
                                                                         (int) n, nrows, offs, offs + 1, 0,
                                                                         sizeof(float) * 8, s));
                CHECK(cudaMemcpy2DAsync(dd, k * sizeof(int), ids_out, ncols * sizeof(int), k * sizeof(int), nrows,
                                        cudaMemcpyDeviceToDevice, s));
            } else {
                launch(dx, dd, pv, pi, ncols, nrows, k, side == 1 ? 1 : np, s);
            }
        }
        CHECK(cudaStreamEndCapture(s, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        CHECK(cudaGraphLaunch(ge, s));  // warm-up
        CHECK(cudaStreamSynchronize(s));
        cudaEvent_t a, b;
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        us[side] = 1000.f * ms / iters;
        CHECK(cudaGraphExecDestroy(ge));
        CHECK(cudaGraphDestroy(g));
    }
    printf("time rows %2d cols %6d k %2d: radix sort + copy %.1f us, k_top_k_small %.1f us (%.1fx)", nrows, ncols, k,
           us[0], us[1], us[0] / us[1]);
    if (np > 1) {
        printf(", in %d parts + merge %.1f us (%.1fx)", np, us[2], us[0] / us[2]);
    }
    printf("\n");
    cudaFree(pv);
    cudaFree(pi);
    cudaFree(dx);
    cudaFree(keys_out);
    cudaFree(dd);
    cudaFree(ids_in);
    cudaFree(ids_out);
    cudaFree(offs);
    cudaFree(tmp);
    cudaStreamDestroy(s);
}

int main() {
    std::mt19937 rng(24);
    int          bad = 0;
    const char * kinds[] = { "normal", "ties", "inf", "nan", "sorted" };
    const int    shapes[][3] = {
        { 16, 49152, 32 }, { 16, 151936, 32 }, { 1, 49152, 32 }, { 20, 1025, 32 },
        { 3, 5000, 1 },    { 7, 4099, 17 },    { 16, 49152, 4 }, { 2, 262144, 32 },
    };
    for (const char * kind : kinds) {
        for (const auto & sh : shapes) {
            bad += check_case(sh[0], sh[1], sh[2], kind, rng);
        }
    }
    for (const auto & sh : { std::array<int, 2>{ 16, 49152 }, { 1, 49152 }, { 16, 151936 } }) {
        time_case(sh[0], sh[1], 32, 200, rng);
    }
    printf("%s: %d case(s) failed\n", bad ? "FAIL" : "ok", bad);
    return bad ? 1 : 0;
}
