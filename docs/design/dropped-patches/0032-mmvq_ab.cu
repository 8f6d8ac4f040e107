// Standalone A/B of patch 0032 (dropped after its engine A/B, sitting s83): MMVQ / 0031 / 0031 + split-K, each kernel alone.
// Build in a llama.cpp tree with 0001-0032 applied (a stub cublas_v2.h in STUB: cublasHandle_t etc.):
//   nvcc -O3 -std=c++17 -arch=sm_90 -I STUB -I ggml/include -I ggml/src -I ggml/src/ggml-cuda -DGGML_USE_CUDA -o mmvq_ab THIS
// MMVQ (upstream's kernels, this tree's mmvq.cu) against patch 0031's tensor-core kernel, standalone:
// the same q8_1 columns and weights, each kernel timed alone (L2 flushed), and their outputs compared.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -I STUB -I ggml/include -I ggml/src -I ggml/src/ggml-cuda mmvq_ab.cu
// Usage: mmvq_ab time | mmvq_ab prof ROWS K N TYPE(4|6)
#include "mmvq.cu"
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

// --- what mmvq.cu needs from the rest of ggml-cuda (one device, no pools) ---
static ggml_cuda_device_info g_info;
const ggml_cuda_device_info & ggml_cuda_info() { return g_info; }
int ggml_cuda_get_device() { return 0; }
void ggml_cuda_set_device(int) {}
void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg) {
    fprintf(stderr, "CUDA error %s in %s (%s:%d): %s\n", msg, func, file, line, stmt); exit(1);
}
void quantize_row_q8_1_cuda(const float *, const int32_t *, void *, ggml_type, int64_t, int64_t, int64_t, int64_t,
        int64_t, int64_t, int64_t, int64_t, cudaStream_t) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
std::unique_ptr<ggml_cuda_pool> ggml_backend_cuda_context::new_pool_for_device(int, int) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
extern "C" {
bool ggml_are_same_stride(const struct ggml_tensor *, const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t, const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
int64_t ggml_blck_size(enum ggml_type t) { return t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q6_K ? QK_K : (fprintf(stderr, "blck_size %d\n", (int) t), abort(), 0); }
bool ggml_is_contiguous(const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
bool ggml_is_contiguously_allocated(const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
bool ggml_is_quantized(enum ggml_type) { return true; }
void ggml_log_internal(enum ggml_log_level, const char *, ...) {}
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "abort %s:%d %s\n", file, line, fmt); abort(); }
size_t ggml_nbytes(const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
int64_t ggml_nelements(const struct ggml_tensor *) { fprintf(stderr, "stub called: %s\n", __func__); abort(); }
const char * ggml_type_name(enum ggml_type) { return "?"; }
size_t ggml_type_size(enum ggml_type t) { return t == GGML_TYPE_Q4_K ? sizeof(block_q4_K) : t == GGML_TYPE_Q6_K ? sizeof(block_q6_K) : (fprintf(stderr, "type_size %d\n", (int) t), abort(), 0); }
}

#define CK(x) CUDA_CHECK(x)
static std::mt19937 rng(1234);
static float unif(float a, float b) { return std::uniform_real_distribution<float>(a, b)(rng); }

// random Q4_K / Q6_K rows (valid halves), random q8_1 columns, as raw bytes
static std::vector<uint8_t> make_x(int type, int nrows, int K) {
    const size_t bs = type == 4 ? sizeof(block_q4_K) : sizeof(block_q6_K);
    std::vector<uint8_t> v((size_t) nrows * (K / QK_K) * bs);
    for (auto & b : v) b = rng() & 0xff;
    for (size_t i = 0; i < v.size() / bs; ++i) {
        uint8_t * p = v.data() + i * bs;
        if (type == 4) { half2 dm = __floats2half2_rn(unif(0.001f, 0.01f), unif(0.001f, 0.01f)); memcpy(p, &dm, 4); }
        else { half d = __float2half(unif(0.0005f, 0.005f)); memcpy(p + 208, &d, 2); }
    }
    return v;
}
static std::vector<block_q8_1> make_y(int ncols, int K) {
    std::vector<block_q8_1> y((size_t) ncols * (K / 32));
    for (auto & b : y) {
        float xs[32], amax = 0, sum = 0;
        for (float & x : xs) { x = unif(-1, 1); amax = fmaxf(amax, fabsf(x)); sum += x; }
        const float d = amax / 127.f;
        for (int i = 0; i < 32; ++i) b.qs[i] = (int8_t) roundf(xs[i] / d);
        b.ds = __floats2half2_rn(d, sum);
    }
    return y;
}

struct Case { const char * name; int type, nrows, K; };

static void run_mmvq(int type, const void * x, const void * y, float * d, int K, int nrows, int n, cudaStream_t s) {
    const ggml_cuda_mm_fusion_args_device nofuse{};
    const int sy = K / 32;
    mul_mat_vec_q_switch_type(x, type == 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q6_K, y, nullptr, nofuse, d, K, nrows, n,
        K / QK_K, sy, nrows, 1, 1, 1, 0, n * sy, nrows * n, 1, 1, 0, n * sy, nrows * n, 0, s, false);
}
static void run_mma(int type, const void * x, const void * y, float * d, int K, int nrows, int n, cudaStream_t s, bool split = false) {
    mul_mat_vec_mma_cuda(type == 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q6_K, x, y, d, K, nrows, n, K / QK_K, K / 32, nrows, s, split);
}

int main(int argc, char ** argv) {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    g_info.device_count = 1;
    g_info.devices[0].cc = 100 * p.major + 10 * p.minor;
    g_info.devices[0].nsm = p.multiProcessorCount;
    g_info.devices[0].warp_size = 32;
    g_info.devices[0].smpb = p.sharedMemPerBlock; g_info.devices[0].smpbo = p.sharedMemPerBlockOptin;
    const bool prof = argc > 1 && !strcmp(argv[1], "prof");
    std::vector<Case> cases = {
        {"8B q", 4, 4096, 4096}, {"8B kv", 4, 1024, 4096}, {"8B gate", 4, 12288, 4096}, {"8B down4", 4, 4096, 12288},
        {"8B down6", 6, 4096, 12288}, {"8B head6", 6, 151936, 4096},
        {"1.5B q", 4, 1536, 1536}, {"1.5B kv", 4, 256, 1536}, {"1.5B gate", 4, 8960, 1536}, {"1.5B down4", 4, 1536, 8960},
        {"1.5B down6", 6, 1536, 8960}, {"1.5B head6", 6, 151936, 1536}};
    std::vector<int> ns = {1, 2, 4, 8, 12, 16};
    if (prof) { cases = {{"prof", atoi(argv[5]), atoi(argv[2]), atoi(argv[3])}}; ns = {atoi(argv[4])}; }
    char * flush; const size_t fl = 128u << 20; CK(cudaMalloc(&flush, fl));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (const Case & c : cases) {
        auto xh = make_x(c.type, c.nrows, c.K); auto yh = make_y(16, c.K);
        void * x; void * y; float * d0; float * d1; float * d2;
        CK(cudaMalloc(&x, xh.size())); CK(cudaMalloc(&y, yh.size() * sizeof(block_q8_1)));
        CK(cudaMalloc(&d0, sizeof(float) * c.nrows * 16)); CK(cudaMalloc(&d1, sizeof(float) * c.nrows * 16));
        CK(cudaMalloc(&d2, sizeof(float) * c.nrows * 16));
        CK(cudaMemcpy(x, xh.data(), xh.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(y, yh.data(), yh.size() * sizeof(block_q8_1), cudaMemcpyHostToDevice));
        printf("%-11s %6d x %5d:", c.name, c.nrows, c.K);
        for (int n : ns) {
            float best[3] = {1e9f, 1e9f, 1e9f};
            const int iters = prof ? 2 : 25;
            for (int it = 0; it < iters; ++it) {
                for (int k = 0; k < 3; ++k) {
                    CK(cudaMemsetAsync(flush, it, fl));
                    cudaEventRecord(e0);
                    if (k == 0) run_mmvq(c.type, x, y, d0, c.K, c.nrows, n, 0);
                    else if (k == 1) run_mma(c.type, x, y, d1, c.K, c.nrows, n, 0);
                    else run_mma(c.type, x, y, d2, c.K, c.nrows, n, 0, true);
                    cudaEventRecord(e1); cudaEventSynchronize(e1);
                    float ms; cudaEventElapsedTime(&ms, e0, e1); if (it > 1 && ms < best[k]) best[k] = ms;
                }
            }
            CK(cudaGetLastError());
            std::vector<float> a((size_t) c.nrows * n), b((size_t) c.nrows * n), b2((size_t) c.nrows * n);
            CK(cudaMemcpy(a.data(), d0, a.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), d1, b.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b2.data(), d2, b2.size() * 4, cudaMemcpyDeviceToHost));
            double maxd = 0, maxa = 0, maxs = 0;
            for (size_t i = 0; i < a.size(); ++i) {
                maxd = fmax(maxd, fabs(a[i] - b[i])); maxa = fmax(maxa, fabs(a[i])); maxs = fmax(maxs, fabs(b2[i] - b[i]));
            }
            printf("  n=%d %.1f/%.1f/%.1f us (%.2fx, split %.2fx; diff %.1e, split %.1e, of %.1e)", n, best[0] * 1e3, best[1] * 1e3,
                best[2] * 1e3, best[1] / best[0], best[2] / best[0], maxd, maxs, maxa);
        }
        printf("\n");
        cudaFree(x); cudaFree(y); cudaFree(d0); cudaFree(d1); cudaFree(d2);
    }
    return 0;
}
