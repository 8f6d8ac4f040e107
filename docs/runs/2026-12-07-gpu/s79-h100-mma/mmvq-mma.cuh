// dflash-studio (patch 0031): a Q4_K weight matrix times 2-16 q8_1 columns on int8 tensor cores.
//
// MMVQ computes every column with its own dp4a dot products: nvcc decodes each weight block once for
// all columns (the unpacking is shared), but the dp4a work, the column's loads and its scale arithmetic
// grow with the column count, so a speculative verify of 8 rows costs ~1.9x one row on Hopper and
// MMQ's tiles (shared memory, one block an SM under stream-k, a fixup kernel) are no cheaper below
// 16. Here a warp takes 16 weight rows and one 256-weight super-block at a time: it loads the rows'
// 4-bit values straight into an m16n8k32 A fragment (the layout of Q4_K's qs is the fragment's: the
// low and high nibbles of 32 bytes are two 32-weight sub-blocks), the columns' q8_1 values into B,
// and applies the sub-block's scales and mins to the int32 products. The warps of a block split the
// row's super-blocks and add their sums at the end. Its products match MMVQ's except in the min term,
// which uses q8_1's float sum of the column (as MMQ does) instead of the sum of the quantised values.
//
// Needs int8 mma.sync (sm_80+). Host side: mmvq.cu (ggml_cuda_mul_mat_vec_q) calls it for plain 2-D
// Q4_K products of 2-16 columns when DFLASH_MMVQ_MMA is on.
#pragma once

#include <cstdint>

#define DFLASH_MMA_ROWS      16  // weight rows per block (the A fragment's m)
#define DFLASH_MMA_MAX_WARPS 8   // warps per block, each a share of the row's super-blocks

static __device__ __forceinline__ void dflash_mma_s8_16x8x32(int & c0, int & c1, int & c2, int & c3,
        const int a0, const int a1, const int a2, const int a3, const int b0, const int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    (void) a0; (void) a1; (void) a2; (void) a3; (void) b0; (void) b1;
    c0 = c1 = c2 = c3 = 0;
#endif
}

static __device__ __forceinline__ void dflash_mma_s8_16x8x16(int & c0, int & c1, int & c2, int & c3,
        const int a0, const int a1, const int b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
        : "r"(a0), "r"(a1), "r"(b0));
#else
    (void) a0; (void) a1; (void) b0;
    c0 = c1 = c2 = c3 = 0;
#endif
}

// four bytes at a 2-byte aligned address (Q6_K blocks are 210 bytes)
static __device__ __forceinline__ int dflash_mma_int_b2(const uint8_t * p) {
    const uint16_t * p16 = (const uint16_t *) p;
    return (int) ((uint32_t) p16[0] | ((uint32_t) p16[1] << 16));
}

// The warps' sums added up and written: acc[nt][e] is row row0 + g + 8*(e/2), column nt*8 + 2t + e%2.
template <int ncols, int NT>
static __device__ __forceinline__ void dflash_mma_reduce_store(float (&acc)[NT][4], float * __restrict__ dst,
        const int row0, const int nrows_x, const int stride_col_dst) {
    const int lane = threadIdx.x, warp = threadIdx.y, nwarps = blockDim.y;
    const int g = lane >> 2, t = lane & 3;
    __shared__ float red[DFLASH_MMA_MAX_WARPS - 1][NT*4][32];
    if (warp > 0) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                red[warp - 1][nt*4 + e][lane] = acc[nt][e];
            }
        }
    }
    __syncthreads();
    if (warp > 0) {
        return;
    }
    for (int w = 0; w < nwarps - 1; ++w) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc[nt][e] += red[w][nt*4 + e][lane];
            }
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int n0 = nt*8 + 2*t;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int n = n0 + (e & 1);
            const int r = row0 + g + 8*(e >> 1);
            if (n < ncols && r < nrows_x) {
                dst[(int64_t) n*stride_col_dst + r] = acc[nt][e];
            }
        }
    }
}

// dst[col*stride_col_dst + row] = sum_k x[row][k] * y[col][k] for rows < nrows_x, cols < ncols.
// x: Q4_K rows of ncols_x weights, stride_row_x blocks apart; y: q8_1 columns, stride_col_y blocks apart.
// Grid: ceil(nrows_x / 16) blocks of (32, nwarps) threads, nwarps <= DFLASH_MMA_MAX_WARPS.
template <int ncols>
static __global__ void __launch_bounds__(32*DFLASH_MMA_MAX_WARPS) mul_mat_vec_mma_q4_K(
        const void * __restrict__ vx, const void * __restrict__ vy, float * __restrict__ dst,
        const int ncols_x, const int nrows_x, const int stride_row_x, const int stride_col_y, const int stride_col_dst) {
    static_assert(ncols >= 1 && ncols <= 16, "1..16 columns");
    constexpr int NT = (ncols + 7) / 8;  // n-tiles of 8 columns
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x, warp = threadIdx.y, nwarps = blockDim.y;
    const int g = lane >> 2, t = lane & 3;  // the fragments' group (row / column) and thread in group
    const int row0 = blockIdx.x * DFLASH_MMA_ROWS;
    // rows past the matrix read its last row (their sums are never written)
    const int rA = min(row0 + g, nrows_x - 1), rB = min(row0 + g + 8, nrows_x - 1);
    const int nsb = ncols_x / QK_K;
    const block_q4_K * xA = (const block_q4_K *) vx + (int64_t) rA * stride_row_x;
    const block_q4_K * xB = (const block_q4_K *) vx + (int64_t) rB * stride_row_x;
    const block_q8_1 * y = (const block_q8_1 *) vy;

    // the column whose B fragment this lane loads (g), and the two whose C entries it holds (2t, 2t+1);
    // columns past ncols read the last one (their sums are never written)
    const block_q8_1 * yB[NT];
    const block_q8_1 * yC0[NT];
    const block_q8_1 * yC1[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        yB[nt]  = y + (int64_t) min(nt*8 + g,       ncols - 1) * stride_col_y;
        yC0[nt] = y + (int64_t) min(nt*8 + 2*t,     ncols - 1) * stride_col_y;
        yC1[nt] = y + (int64_t) min(nt*8 + 2*t + 1, ncols - 1) * stride_col_y;
    }

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    }

    for (int sb = warp; sb < nsb; sb += nwarps) {
        const block_q4_K * bA = xA + sb;
        const block_q4_K * bB = xB + sb;

        // 6-bit scales and mins of the 8 sub-blocks, four to a word (get_scale_min_k4's layout)
        const uint32_t * sA = (const uint32_t *) bA->scales;
        const uint32_t * sB = (const uint32_t *) bB->scales;
        const uint32_t a_s0 = sA[0], a_s1 = sA[1], a_s2 = sA[2];
        const uint32_t b_s0 = sB[0], b_s1 = sB[1], b_s2 = sB[2];
        const uint32_t scA[2] = { a_s0 & 0x3f3f3f3fu, (a_s2 & 0x0f0f0f0fu) | ((a_s0 >> 2) & 0x30303030u) };
        const uint32_t mnA[2] = { a_s1 & 0x3f3f3f3fu, ((a_s2 >> 4) & 0x0f0f0f0fu) | ((a_s1 >> 2) & 0x30303030u) };
        const uint32_t scB[2] = { b_s0 & 0x3f3f3f3fu, (b_s2 & 0x0f0f0f0fu) | ((b_s0 >> 2) & 0x30303030u) };
        const uint32_t mnB[2] = { b_s1 & 0x3f3f3f3fu, ((b_s2 >> 4) & 0x0f0f0f0fu) | ((b_s1 >> 2) & 0x30303030u) };
        const float2 dmA = __half22float2(bA->dm);
        const float2 dmB = __half22float2(bB->dm);

        // chunk c (64 weights): bytes 32c..32c+31, low nibbles sub-block 2c, high nibbles 2c+1; this
        // lane's A columns are k = 4t..4t+3 (bytes 32c+4t) and 16+4t..19+4t (bytes 32c+16+4t)
        const int * qA = (const int *) bA->qs;
        const int * qB = (const int *) bB->qs;
        int qa_lo[4], qa_hi[4], qb_lo[4], qb_hi[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            qa_lo[c] = qA[8*c + t];
            qa_hi[c] = qA[8*c + 4 + t];
            qb_lo[c] = qB[8*c + t];
            qb_hi[c] = qB[8*c + 4 + t];
        }

#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const int c = s >> 1, sh = 4*(s & 1);
            const int a0 = (qa_lo[c] >> sh) & 0x0F0F0F0F;  // row g,   k  0..15 part
            const int a1 = (qb_lo[c] >> sh) & 0x0F0F0F0F;  // row g+8, k  0..15 part
            const int a2 = (qa_hi[c] >> sh) & 0x0F0F0F0F;  // row g,   k 16..31 part
            const int a3 = (qb_hi[c] >> sh) & 0x0F0F0F0F;  // row g+8, k 16..31 part
            const int w = s >> 2, bsh = 8*(s & 3);
            const float fdA = dmA.x * (float) ((scA[w] >> bsh) & 0xff);
            const float fmA = dmA.y * (float) ((mnA[w] >> bsh) & 0xff);
            const float fdB = dmB.x * (float) ((scB[w] >> bsh) & 0xff);
            const float fmB = dmB.y * (float) ((mnB[w] >> bsh) & 0xff);
            const int kb = sb*(QK_K/QK8_1) + s;  // the q8_1 block of this sub-block

#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int * yq = (const int *) yB[nt][kb].qs;
                int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
                dflash_mma_s8_16x8x32(c0, c1, c2, c3, a0, a1, a2, a3, yq[t], yq[4 + t]);
                const float2 ds0 = __half22float2(yC0[nt][kb].ds);
                const float2 ds1 = __half22float2(yC1[nt][kb].ds);
                acc[nt][0] += fdA*ds0.x*(float) c0 - fmA*ds0.y;
                acc[nt][1] += fdA*ds1.x*(float) c1 - fmA*ds1.y;
                acc[nt][2] += fdB*ds0.x*(float) c2 - fmB*ds0.y;
                acc[nt][3] += fdB*ds1.x*(float) c3 - fmB*ds1.y;
            }
        }
    }

    dflash_mma_reduce_store<ncols, NT>(acc, dst, row0, nrows_x, stride_col_dst);
#else
    (void) vx; (void) vy; (void) dst; (void) ncols_x; (void) nrows_x; (void) stride_row_x; (void) stride_col_y;
    (void) stride_col_dst; (void) NT;
#endif
}

// The same for Q6_K (Q4_K_M's head, and half of its attn_v and ffn_down). A super-block is two halves of
// 128 weights; in half h the 32-weight sub-block j takes the low (j < 2) or high nibbles of ql bytes
// 64h + 32(j%2) + l and bits 2j..2j+1 of qh byte 32h + l, minus 32, and one int8 scale per 16 weights
// (scales[8h + 2j + l/16]). The scale changes inside a sub-block, so each 16 weights are one
// m16n8k16 product: the lane's A columns k = 4t..4t+3 of each.
template <int ncols>
static __global__ void __launch_bounds__(32*DFLASH_MMA_MAX_WARPS) mul_mat_vec_mma_q6_K(
        const void * __restrict__ vx, const void * __restrict__ vy, float * __restrict__ dst,
        const int ncols_x, const int nrows_x, const int stride_row_x, const int stride_col_y, const int stride_col_dst) {
    static_assert(ncols >= 1 && ncols <= 16, "1..16 columns");
    constexpr int NT = (ncols + 7) / 8;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int lane = threadIdx.x, warp = threadIdx.y, nwarps = blockDim.y;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.x * DFLASH_MMA_ROWS;
    const int rA = min(row0 + g, nrows_x - 1), rB = min(row0 + g + 8, nrows_x - 1);
    const int nsb = ncols_x / QK_K;
    const block_q6_K * xA = (const block_q6_K *) vx + (int64_t) rA * stride_row_x;
    const block_q6_K * xB = (const block_q6_K *) vx + (int64_t) rB * stride_row_x;
    const block_q8_1 * y = (const block_q8_1 *) vy;

    const block_q8_1 * yB[NT];
    const block_q8_1 * yC0[NT];
    const block_q8_1 * yC1[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        yB[nt]  = y + (int64_t) min(nt*8 + g,       ncols - 1) * stride_col_y;
        yC0[nt] = y + (int64_t) min(nt*8 + 2*t,     ncols - 1) * stride_col_y;
        yC1[nt] = y + (int64_t) min(nt*8 + 2*t + 1, ncols - 1) * stride_col_y;
    }

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    }

    for (int sb = warp; sb < nsb; sb += nwarps) {
        const block_q6_K * bA = xA + sb;
        const block_q6_K * bB = xB + sb;
        const float dA = __half2float(bA->d);
        const float dB = __half2float(bB->d);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // ql: bytes 64h + 16p + 4t, p = 0..3 (p = 2(j%2) + the k half); qh: bytes 32h + 16q + 4t
            int la[4], lb[4], ha[2], hb[2];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                la[p] = dflash_mma_int_b2(bA->ql + 64*h + 16*p + 4*t);
                lb[p] = dflash_mma_int_b2(bB->ql + 64*h + 16*p + 4*t);
            }
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                ha[q] = dflash_mma_int_b2(bA->qh + 32*h + 16*q + 4*t);
                hb[q] = dflash_mma_int_b2(bB->qh + 32*h + 16*q + 4*t);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int lsh = 4*(j >> 1), hsh = 2*j;
                const int kb = sb*(QK_K/QK8_1) + 4*h + j;  // the q8_1 block of this sub-block
#pragma unroll
                for (int half = 0; half < 2; ++half) {  // k 0..15, then 16..31: one scale each
                    const int p = 2*(j & 1) + half;
                    const int a0 = __vsub4(((la[p] >> lsh) & 0x0F0F0F0F) | (((ha[half] >> hsh) & 0x03030303) << 4), 0x20202020);
                    const int a1 = __vsub4(((lb[p] >> lsh) & 0x0F0F0F0F) | (((hb[half] >> hsh) & 0x03030303) << 4), 0x20202020);
                    const float fA = dA * (float) bA->scales[8*h + 2*j + half];
                    const float fB = dB * (float) bB->scales[8*h + 2*j + half];
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        const int * yq = (const int *) yB[nt][kb].qs;
                        int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
                        dflash_mma_s8_16x8x16(c0, c1, c2, c3, a0, a1, yq[4*half + t]);
                        const float d80 = __low2float(yC0[nt][kb].ds);
                        const float d81 = __low2float(yC1[nt][kb].ds);
                        acc[nt][0] += fA*d80*(float) c0;
                        acc[nt][1] += fA*d81*(float) c1;
                        acc[nt][2] += fB*d80*(float) c2;
                        acc[nt][3] += fB*d81*(float) c3;
                    }
                }
            }
        }
    }
    dflash_mma_reduce_store<ncols, NT>(acc, dst, row0, nrows_x, stride_col_dst);
#else
    (void) vx; (void) vy; (void) dst; (void) ncols_x; (void) nrows_x; (void) stride_row_x; (void) stride_col_y;
    (void) stride_col_dst; (void) NT;
#endif
}

// nwarps: the row's super-blocks split over at most DFLASH_MMA_MAX_WARPS warps
static inline int dflash_mma_nwarps(const int ncols_x) {
    const int nsb = ncols_x / QK_K;
    return nsb < 1 ? 1 : (nsb < DFLASH_MMA_MAX_WARPS ? nsb : DFLASH_MMA_MAX_WARPS);
}

// Whether this kernel computes a product of `type` weights (host side; the column count is 1..16).
static inline bool dflash_mma_type(const int type) {
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K;
}

template <int ncols>
static void mul_mat_vec_mma_launch(const int type, const void * vx, const void * vy, float * dst, const int ncols_x,
        const int nrows_x, const int stride_row_x, const int stride_col_y, const int stride_col_dst, cudaStream_t stream) {
    const dim3 block_nums((nrows_x + DFLASH_MMA_ROWS - 1) / DFLASH_MMA_ROWS, 1, 1);
    const dim3 block_dims(32, dflash_mma_nwarps(ncols_x), 1);
    if (type == GGML_TYPE_Q4_K) {
        mul_mat_vec_mma_q4_K<ncols><<<block_nums, block_dims, 0, stream>>>(
            vx, vy, dst, ncols_x, nrows_x, stride_row_x, stride_col_y, stride_col_dst);
    } else {
        mul_mat_vec_mma_q6_K<ncols><<<block_nums, block_dims, 0, stream>>>(
            vx, vy, dst, ncols_x, nrows_x, stride_row_x, stride_col_y, stride_col_dst);
    }
}

// type Q4_K or Q6_K (dflash_mma_type), ncols in 1..16
static void mul_mat_vec_mma_cuda(const int type, const void * vx, const void * vy, float * dst, const int ncols_x,
        const int nrows_x, const int ncols, const int stride_row_x, const int stride_col_y, const int stride_col_dst,
        cudaStream_t stream) {
#define DFLASH_MMA_CASE(N) \
    case N: mul_mat_vec_mma_launch<N>(type, vx, vy, dst, ncols_x, nrows_x, stride_row_x, stride_col_y, stride_col_dst, stream); break;
    switch (ncols) {
        DFLASH_MMA_CASE(1)  DFLASH_MMA_CASE(2)  DFLASH_MMA_CASE(3)  DFLASH_MMA_CASE(4)
        DFLASH_MMA_CASE(5)  DFLASH_MMA_CASE(6)  DFLASH_MMA_CASE(7)  DFLASH_MMA_CASE(8)
        DFLASH_MMA_CASE(9)  DFLASH_MMA_CASE(10) DFLASH_MMA_CASE(11) DFLASH_MMA_CASE(12)
        DFLASH_MMA_CASE(13) DFLASH_MMA_CASE(14) DFLASH_MMA_CASE(15) DFLASH_MMA_CASE(16)
        default: break;
    }
#undef DFLASH_MMA_CASE
}
