// Variants of patch 0031's Q4_K kernel for the standalone A/B: RG row groups of 16 rows per block
// (warps = RG x KS, KS K-slices), and the weights loaded with L1::no_allocate (the columns stay in L1).
template <bool noalloc>
static __device__ __forceinline__ int v_ld(const int * p) {
    if constexpr (noalloc) {
        int v;
        asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(v) : "l"(p));
        return v;
    } else {
        return __ldg(p);
    }
}

template <int ncols, bool noalloc, int RG>
static __global__ void __launch_bounds__(256) mma_v_q4_K(
        const void * __restrict__ vx, const void * __restrict__ vy, float * __restrict__ dst,
        const int ncols_x, const int nrows_x, const int stride_row_x, const int stride_col_y, const int stride_col_dst) {
    constexpr int NT = (ncols + 7) / 8;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x, warp = threadIdx.y;
    const int KS = blockDim.y / RG;
    const int rg = warp % RG, ks = warp / RG;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.x * (16 * RG) + 16 * rg;
    const int rA = min(row0 + g, nrows_x - 1), rB = min(row0 + g + 8, nrows_x - 1);
    const int nsb = ncols_x / QK_K;
    const block_q4_K * xA = (const block_q4_K *) vx + (int64_t) rA * stride_row_x;
    const block_q4_K * xB = (const block_q4_K *) vx + (int64_t) rB * stride_row_x;
    const block_q8_1 * y = (const block_q8_1 *) vy;
    const block_q8_1 * yB[NT]; const block_q8_1 * yC0[NT]; const block_q8_1 * yC1[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        yB[nt]  = y + (int64_t) min(nt*8 + g,       ncols - 1) * stride_col_y;
        yC0[nt] = y + (int64_t) min(nt*8 + 2*t,     ncols - 1) * stride_col_y;
        yC1[nt] = y + (int64_t) min(nt*8 + 2*t + 1, ncols - 1) * stride_col_y;
    }
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) { acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f; }
    for (int sb = ks; sb < nsb; sb += KS) {
        const block_q4_K * bA = xA + sb;
        const block_q4_K * bB = xB + sb;
        const int * sA = (const int *) bA->scales;
        const int * sB = (const int *) bB->scales;
        const uint32_t a_s0 = v_ld<noalloc>(sA), a_s1 = v_ld<noalloc>(sA + 1), a_s2 = v_ld<noalloc>(sA + 2);
        const uint32_t b_s0 = v_ld<noalloc>(sB), b_s1 = v_ld<noalloc>(sB + 1), b_s2 = v_ld<noalloc>(sB + 2);
        const uint32_t scA[2] = { a_s0 & 0x3f3f3f3fu, (a_s2 & 0x0f0f0f0fu) | ((a_s0 >> 2) & 0x30303030u) };
        const uint32_t mnA[2] = { a_s1 & 0x3f3f3f3fu, ((a_s2 >> 4) & 0x0f0f0f0fu) | ((a_s1 >> 2) & 0x30303030u) };
        const uint32_t scB[2] = { b_s0 & 0x3f3f3f3fu, (b_s2 & 0x0f0f0f0fu) | ((b_s0 >> 2) & 0x30303030u) };
        const uint32_t mnB[2] = { b_s1 & 0x3f3f3f3fu, ((b_s2 >> 4) & 0x0f0f0f0fu) | ((b_s1 >> 2) & 0x30303030u) };
        const int dmAi = v_ld<noalloc>((const int *) &bA->dm), dmBi = v_ld<noalloc>((const int *) &bB->dm);
        const float2 dmA = __half22float2(*(const half2 *) &dmAi);
        const float2 dmB = __half22float2(*(const half2 *) &dmBi);
        const int * qA = (const int *) bA->qs;
        const int * qB = (const int *) bB->qs;
        int qa_lo[4], qa_hi[4], qb_lo[4], qb_hi[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            qa_lo[c] = v_ld<noalloc>(qA + 8*c + t); qa_hi[c] = v_ld<noalloc>(qA + 8*c + 4 + t);
            qb_lo[c] = v_ld<noalloc>(qB + 8*c + t); qb_hi[c] = v_ld<noalloc>(qB + 8*c + 4 + t);
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const int c = s >> 1, sh = 4*(s & 1);
            const int a0 = (qa_lo[c] >> sh) & 0x0F0F0F0F, a1 = (qb_lo[c] >> sh) & 0x0F0F0F0F;
            const int a2 = (qa_hi[c] >> sh) & 0x0F0F0F0F, a3 = (qb_hi[c] >> sh) & 0x0F0F0F0F;
            const int w = s >> 2, bsh = 8*(s & 3);
            const float fdA = dmA.x * (float) ((scA[w] >> bsh) & 0xff), fmA = dmA.y * (float) ((mnA[w] >> bsh) & 0xff);
            const float fdB = dmB.x * (float) ((scB[w] >> bsh) & 0xff), fmB = dmB.y * (float) ((mnB[w] >> bsh) & 0xff);
            const int kb = sb*(QK_K/QK8_1) + s;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int * yq = (const int *) yB[nt][kb].qs;
                int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
                dflash_mma_s8_16x8x32(c0, c1, c2, c3, a0, a1, a2, a3, yq[t], yq[4 + t]);
                const float2 ds0 = __half22float2(yC0[nt][kb].ds), ds1 = __half22float2(yC1[nt][kb].ds);
                acc[nt][0] += fdA*ds0.x*(float) c0 - fmA*ds0.y;
                acc[nt][1] += fdA*ds1.x*(float) c1 - fmA*ds1.y;
                acc[nt][2] += fdB*ds0.x*(float) c2 - fmB*ds0.y;
                acc[nt][3] += fdB*ds1.x*(float) c3 - fmB*ds1.y;
            }
        }
    }
    __shared__ float red[8][NT*4][32];
    if (ks > 0) {
        for (int nt = 0; nt < NT; ++nt) for (int e = 0; e < 4; ++e) red[warp - RG][nt*4 + e][lane] = acc[nt][e];
    }
    __syncthreads();
    if (ks > 0) return;
    for (int k = 1; k < KS; ++k) {
        for (int nt = 0; nt < NT; ++nt) for (int e = 0; e < 4; ++e) acc[nt][e] += red[(k - 1)*RG + rg][nt*4 + e][lane];
    }
    for (int nt = 0; nt < NT; ++nt) {
        for (int e = 0; e < 4; ++e) {
            const int n = nt*8 + 2*t + (e & 1), r = row0 + g + 8*(e >> 1);
            if (n < ncols && r < nrows_x) dst[(int64_t) n*stride_col_dst + r] = acc[nt][e];
        }
    }
#endif
}

template <bool noalloc, int RG>
static void run_v_q4_K(const void * x, const void * y, float * d, int K, int nrows, int n, cudaStream_t s) {
    const int nsb = K / QK_K;
    int nw = 8;
    while (nw > RG && nw / RG > nsb) nw /= 2;   // K-slices no more than super-blocks
    const dim3 grid((nrows + 16*RG - 1) / (16*RG)), block(32, nw);
#define VC(N) case N: mma_v_q4_K<N, noalloc, RG><<<grid, block, 0, s>>>(x, y, d, K, nrows, K / QK_K, K / 32, nrows); break;
    switch (n) { VC(1) VC(2) VC(4) VC(8) VC(12) VC(16) default: break; }
#undef VC
}
