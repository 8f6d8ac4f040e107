#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t;
typedef int cublasComputeType_t;
typedef int cublasGemmAlgo_t;
typedef int cublasOperation_t;
#define CUBLAS_STATUS_SUCCESS 0
#define CUBLAS_OP_T 1
#define CUBLAS_OP_N 0
#define CUBLAS_COMPUTE_16F 64
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_COMPUTE_32F_FAST_16F 74
#define CUBLAS_GEMM_DEFAULT_TENSOR_OP 99
#define CUBLAS_GEMM_DEFAULT -1
#define CUBLAS_TF32_TENSOR_OP_MATH 3
#define CUBLAS_DEFAULT_MATH 0
static inline const char* cublasGetStatusString(cublasStatus_t){return "";}
static inline cublasStatus_t cublasCreate(cublasHandle_t*){return 0;}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t,int){return 0;}
static inline cublasStatus_t cublasSetStream(cublasHandle_t,cudaStream_t){return 0;}
