// Standalone check and timing of patch 0031's Q4_K x q8_1 tensor-core kernel (mmvq-mma.cuh).
// Usage: mma_test [check|time]
#define GGML_COMMON_DECL_CUDA
#include "ggml-common.h"
#include "ggml.h"
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include "mmvq-mma.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

static std::mt19937 rng(1234);
static float unif(float a, float b) { return std::uniform_real_distribution<float>(a, b)(rng); }

template <typename T> struct Buf {  // block structs hold half2 unions: no std::vector
    T * p = nullptr; size_t n = 0;
    void resize(size_t m) { free(p); n = m; p = (T *) calloc(m, sizeof(T)); }
    void assign(size_t m, T) { resize(m); }
    size_t size() const { return n; } T * data() { return p; } T & operator[](size_t i) { return p[i]; }
    T * begin() { return p; } T * end() { return p + n; }
    ~Buf() { free(p); }
};
static void make_q4K(Buf<block_q4_K> & x, int nrows, int K) {
    x.resize((size_t) nrows * (K / QK_K));
    for (auto & b : x) {
        b.dm = __floats2half2_rn(unif(0.001f, 0.01f), unif(0.001f, 0.01f));
        for (int i = 0; i < 12; ++i) b.scales[i] = rng() & 0xff;
        for (int i = 0; i < QK_K/2; ++i) b.qs[i] = rng() & 0xff;
    }
}
static void make_q6K(Buf<block_q6_K> & x, int nrows, int K) {
    x.resize((size_t) nrows * (K / QK_K));
    for (auto & b : x) {
        b.d = __float2half(unif(0.0005f, 0.005f));
        for (int i = 0; i < QK_K/16; ++i) b.scales[i] = (int8_t) (rng() & 0xff);
        for (int i = 0; i < QK_K/2; ++i) b.ql[i] = rng() & 0xff;
        for (int i = 0; i < QK_K/4; ++i) b.qh[i] = rng() & 0xff;
    }
}
static double ref_dot6(const block_q6_K * xr, const block_q8_1 * yc, int K) {
    double acc = 0;
    for (int sb = 0; sb < K/QK_K; ++sb) {
        const block_q6_K & b = xr[sb];
        const float d = __half2float(b.d);
        for (int n = 0; n < 2; ++n) for (int l = 0; l < 32; ++l) {
            const uint8_t * ql = b.ql + 64*n; const uint8_t * qh = b.qh + 32*n; const int8_t * sc = b.scales + 8*n;
            const int is = l/16;
            const int q[4] = { ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32, ((ql[l+32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32,
                               ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32, ((ql[l+32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32 };
            for (int j = 0; j < 4; ++j) {
                const int k = sb*QK_K + 128*n + 32*j + l;
                const block_q8_1 & q8 = yc[k/32];
                acc += (double) d * sc[is + 2*j] * q[j] * __low2float(q8.ds) * q8.qs[k%32];
            }
        }
    }
    return acc;
}
static void scale_min(int j, const uint8_t * q, int & d, int & m) {
    if (j < 4) { d = q[j] & 63; m = q[j + 4] & 63; }
    else { d = (q[j+4] & 0xF) | ((q[j-4] >> 6) << 4); m = (q[j+4] >> 4) | ((q[j-0] >> 6) << 4); }
}
static void make_q8_1(Buf<block_q8_1> & y, std::vector<float> & yf, int ncols, int K, int stride) {
    y.assign((size_t) ncols * stride, block_q8_1{});
    yf.resize((size_t) ncols * K);
    for (auto & v : yf) v = unif(-1.f, 1.f);
    for (int c = 0; c < ncols; ++c) for (int kb = 0; kb < K/32; ++kb) {
        const float * xs = &yf[(size_t) c*K + kb*32];
        float amax = 0, sum = 0; for (int i = 0; i < 32; ++i) { amax = fmaxf(amax, fabsf(xs[i])); sum += xs[i]; }
        const float d = amax / 127.f;
        block_q8_1 & b = y[(size_t) c*stride + kb];
        for (int i = 0; i < 32; ++i) b.qs[i] = (int8_t) roundf(d == 0 ? 0 : xs[i] / d);
        b.ds = __floats2half2_rn(d, sum);
    }
}
// the kernel's formula in double: sum_s d*sc_s*d8_s*sum(q*q8) - dmin*m_s*s8_s
static double ref_dot(const block_q4_K * xr, const block_q8_1 * yc, int K) {
    double acc = 0;
    for (int sb = 0; sb < K/QK_K; ++sb) {
        const block_q4_K & b = xr[sb];
        const float d = __low2float(b.dm), dmin = __high2float(b.dm);
        for (int s = 0; s < 8; ++s) {
            int sc, m; scale_min(s, b.scales, sc, m);
            const block_q8_1 & q8 = yc[sb*8 + s];
            const float d8 = __low2float(q8.ds), s8 = __high2float(q8.ds);
            long dot = 0;
            for (int i = 0; i < 32; ++i) {
                const int byte = 32*(s/2) + i;
                const int q = (s & 1) ? (b.qs[byte] >> 4) : (b.qs[byte] & 0xF);
                dot += q * q8.qs[i];
            }
            acc += (double) d*sc*d8*dot - (double) dmin*m*s8;
        }
    }
    return acc;
}

template <typename B> static void make_x(Buf<B> & x, int nrows, int K);
template <> void make_x(Buf<block_q4_K> & x, int nrows, int K) { make_q4K(x, nrows, K); }
template <> void make_x(Buf<block_q6_K> & x, int nrows, int K) { make_q6K(x, nrows, K); }
static double ref(const block_q4_K * x, const block_q8_1 * y, int K) { return ref_dot(x, y, K); }
static double ref(const block_q6_K * x, const block_q8_1 * y, int K) { return ref_dot6(x, y, K); }
template <typename B> static int type_of();
template <> int type_of<block_q4_K>() { return GGML_TYPE_Q4_K; }
template <> int type_of<block_q6_K>() { return GGML_TYPE_Q6_K; }

template <typename BX> static int check(int nrows, int K, int ncols) {
    Buf<BX> x; make_x(x, nrows, K);
    const int stride_y = K/32 + 3;  // a padded column stride, as ggml's may be
    Buf<block_q8_1> y; std::vector<float> yf; make_q8_1(y, yf, ncols, K, stride_y);
    const int stride_dst = nrows + 5;
    void *dx, *dy; float * dd;
    CK(cudaMalloc(&dx, x.size()*sizeof(x[0]))); CK(cudaMalloc(&dy, y.size()*sizeof(block_q8_1)));
    CK(cudaMalloc(&dd, sizeof(float)*stride_dst*ncols));
    CK(cudaMemcpy(dx, x.data(), x.size()*sizeof(x[0]), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y.data(), y.size()*sizeof(block_q8_1), cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, sizeof(float)*stride_dst*ncols));  // NaN: unwritten entries show
    mul_mat_vec_mma_cuda(type_of<BX>(), dx, dy, dd, K, nrows, ncols, K/QK_K, stride_y, stride_dst, 0);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    std::vector<float> out((size_t) stride_dst*ncols); CK(cudaMemcpy(out.data(), dd, out.size()*4, cudaMemcpyDeviceToHost));
    double maxrel = 0; int bad = 0;
    for (int c = 0; c < ncols; ++c) for (int r = 0; r < nrows; ++r) {
        const double ref = ::ref(&x[(size_t) r*(K/QK_K)], &y[(size_t) c*stride_y], K);
        const double got = out[(size_t) c*stride_dst + r];
        // sums of ~1e3 terms of size ~1 cancel to ~1e-3 at times: an absolute floor
        const double rel = fabs(got - ref) / (fabs(ref) + 0.05);
        if (!(rel < 1e-3)) { if (bad < 5) printf("  bad r=%d c=%d got %g ref %g\n", r, c, got, ref); bad++; }
        if (rel > maxrel || rel != rel) maxrel = rel;
    }
    printf("check %s rows %d K %d cols %d: max rel err %.2e, %d bad\n", type_of<BX>() == GGML_TYPE_Q4_K ? "q4_K" : "q6_K", nrows, K, ncols, maxrel, bad);
    cudaFree(dx); cudaFree(dy); cudaFree(dd);
    return bad;
}

template <typename BX> static void timeit(const char * name, int nrows, int K) {
    Buf<BX> x; make_x(x, nrows, K);
    const int stride_y = K/32;
    Buf<block_q8_1> y; std::vector<float> yf; make_q8_1(y, yf, 16, K, stride_y);
    void *dx, *dy; float * dd;
    CK(cudaMalloc(&dx, x.size()*sizeof(x[0]))); CK(cudaMalloc(&dy, y.size()*sizeof(block_q8_1)));
    CK(cudaMalloc(&dd, sizeof(float)*nrows*16));
    CK(cudaMemcpy(dx, x.data(), x.size()*sizeof(x[0]), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y.data(), y.size()*sizeof(block_q8_1), cudaMemcpyHostToDevice));
    // a buffer larger than L2 written between launches, so the weights come from HBM each time
    static char * flush = nullptr; const size_t fl = 128u << 20; if (!flush) CK(cudaMalloc(&flush, fl));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    printf("%-10s %6d x %5d (%.1f MB):", name, nrows, K, x.size()*sizeof(x[0])/1e6);
    for (int n : {1, 2, 4, 8, 12, 16}) {
        float best = 1e9; const int iters = 30;
        for (int it = 0; it < iters; ++it) {
            CK(cudaMemsetAsync(flush, it, fl));
            cudaEventRecord(e0);
            mul_mat_vec_mma_cuda(type_of<BX>(), dx, dy, dd, K, nrows, n, K/QK_K, stride_y, nrows, 0);
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); if (it > 2 && ms < best) best = ms;
        }
        printf("  n=%d %.1f us (%.0f GB/s)", n, best*1e3, x.size()*sizeof(x[0])/(best*1e-3)/1e9);
    }
    printf("\n");
    cudaFree(dx); cudaFree(dy); cudaFree(dd);
}

int main(int argc, char ** argv) {
    const bool do_time = argc > 1 && !strcmp(argv[1], "time");
    int bad = 0;
    for (int n : {1, 2, 3, 7, 8, 9, 13, 16}) { bad += check<block_q4_K>(37, 512, n); bad += check<block_q6_K>(37, 512, n); }
    bad += check<block_q4_K>(1536, 1536, 8); bad += check<block_q4_K>(256, 1536, 16); bad += check<block_q4_K>(300, 8960, 5);
    bad += check<block_q6_K>(1536, 1536, 8); bad += check<block_q6_K>(256, 8960, 16);
    bad += check<block_q4_K>(4096, 4096, 16);
    printf(bad ? "CHECK FAILED\n" : "CHECK OK\n");
    if (do_time) {
        timeit<block_q4_K>("8B q", 4096, 4096); timeit<block_q4_K>("8B kv", 1024, 4096); timeit<block_q4_K>("8B gate", 12288, 4096);
        timeit<block_q4_K>("8B down", 4096, 12288); timeit<block_q6_K>("8B down6", 4096, 12288); timeit<block_q6_K>("8B head6", 151936, 4096);
        timeit<block_q4_K>("1.5B q", 1536, 1536); timeit<block_q4_K>("1.5B kv", 256, 1536); timeit<block_q4_K>("1.5B gate", 8960, 1536);
        timeit<block_q4_K>("1.5B down", 1536, 8960); timeit<block_q6_K>("1.5B down6", 1536, 8960); timeit<block_q6_K>("1.5B head6", 151936, 1536);
    }
    return bad ? 1 : 0;
}
