#pragma once
// cuBLAS and cuBLASLt, opened on first use instead of linked. Loading them runs their static initialisers,
// 0.4 s of CPU on a 2-core machine, which every pipewright command paid (planning, simulation, --help) though
// only the CUDA backend's GEMMs call them.
#include <cublasLt.h>
#include <cublas_v2.h>

// The functions called, by library. cublas_v2.h maps some names to their _v2 symbols; the members and the
// symbols looked up follow it.
#define PW_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate)              \
  X(cublasDestroy)             \
  X(cublasSetStream)           \
  X(cublasGetStatusName)       \
  X(cublasGetStatusString)
#define PW_CUBLASLT_FUNCTIONS(X)        \
  X(cublasLtCreate)                     \
  X(cublasLtDestroy)                    \
  X(cublasLtMatmul)                     \
  X(cublasLtMatmulAlgoGetHeuristic)     \
  X(cublasLtMatmulDescCreate)           \
  X(cublasLtMatmulDescDestroy)          \
  X(cublasLtMatmulDescSetAttribute)     \
  X(cublasLtMatmulPreferenceCreate)     \
  X(cublasLtMatmulPreferenceDestroy)    \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)         \
  X(cublasLtMatrixLayoutDestroy)        \
  X(cublasLtMatrixLayoutSetAttribute)

namespace pw::cuda {

struct CublasLibrary {
#define PW_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
  PW_CUBLAS_FUNCTIONS(PW_CUBLAS_MEMBER)
  PW_CUBLASLT_FUNCTIONS(PW_CUBLAS_MEMBER)
#undef PW_CUBLAS_MEMBER
  // cublas_api.h overloads this name with an inline wrapper for the older cudaDataType compute type; the
  // exported function takes a cublasComputeType_t.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                              const void*, const void*, cudaDataType, int, long long, const void*,
                                              cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                              long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// Both libraries opened and every function found, the first time (thread-safe), by their sonames and then in
// the CUDA toolkit's library directory found at build time. Runtime error naming the library or the function
// that is missing.
const CublasLibrary& cublas();
// Whether cublas() has opened them in this process.
bool cublas_opened();

// The file names opened: libcublas.so.<major> and libcublasLt.so.<major> of the headers built against.
const char* cublas_soname();
const char* cublaslt_soname();

}  // namespace pw::cuda
