#include "executor/cuda/gemm.hpp"

#include <cstdint>

#include "executor/cuda/cublas_library.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/device_memory.hpp"

namespace pw::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;

cudaDataType_t cuda_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

cublasLtMatrixLayout_t layout(DType t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch,
                              long long stride) {
  const CublasLibrary& lib = cublas();
  cublasLtMatrixLayout_t l = nullptr;
  PW_CUBLAS(lib.cublasLtMatrixLayoutCreate(&l, cuda_type(t), rows, cols, ld));
  if (batch > 1) {
    const std::int32_t count = batch;
    const std::int64_t offset = stride;
    PW_CUBLAS(lib.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    PW_CUBLAS(
        lib.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset));
  }
  return l;
}

}  // namespace

// The column-major problem cuBLAS solves for a row-major D = op(A) op(B): D^T = op(B)^T op(A)^T, so cuBLAS's
// first operand is B, its second A, and its M x N output is n x m.
struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool lt = false;  // cuBLASLt found an algorithm; otherwise cublasGemmStridedBatchedEx

  ~Plan() {
    const CublasLibrary& lib = cublas();
    if (desc) lib.cublasLtMatmulDescDestroy(desc);
    if (first) lib.cublasLtMatrixLayoutDestroy(first);
    if (second) lib.cublasLtMatrixLayoutDestroy(second);
    if (out) lib.cublasLtMatrixLayoutDestroy(out);
  }
};

Gemm::Gemm(cudaStream_t stream, DeviceAllocator& allocator) : stream_(stream) {
  const CublasLibrary& lib = cublas();
  PW_CUBLAS(lib.cublasLtCreate(&lt_));
  PW_CUBLAS(lib.cublasCreate(&blas_));
  PW_CUBLAS(lib.cublasSetStream(blas_, stream_));
  workspace_ = allocate_block(allocator, kWorkspaceBytes);
}

Gemm::~Gemm() {
  plans_.clear();
  const CublasLibrary& lib = cublas();
  if (blas_) lib.cublasDestroy(blas_);
  if (lt_) lib.cublasLtDestroy(lt_);
}

Gemm::Plan& Gemm::plan_for(const Key& key, DType in, DType out, int m, int n, int k, const GemmOperand& a,
                           const GemmOperand& b, int ldd, long long d_stride, int batch) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  const CublasLibrary& lib = cublas();
  PW_CUBLAS(lib.cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first_op = b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  PW_CUBLAS(
      lib.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof first_op));
  PW_CUBLAS(
      lib.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &second_op, sizeof second_op));
  // cuBLAS's M = n, N = m, K = k; a stored operand is rows x cols as cuBLAS reads it (column-major).
  plan->first = b.transpose ? layout(in, k, n, b.ld, batch, b.stride) : layout(in, n, k, b.ld, batch, b.stride);
  plan->second = a.transpose ? layout(in, m, k, a.ld, batch, a.stride) : layout(in, k, m, a.ld, batch, a.stride);
  plan->out = layout(out, n, m, ldd, batch, d_stride);
  cublasLtMatmulPreference_t pref = nullptr;
  PW_CUBLAS(lib.cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = kWorkspaceBytes;
  PW_CUBLAS(
      lib.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = lib.cublasLtMatmulAlgoGetHeuristic(lt_, plan->desc, plan->first, plan->second,
                                                                    plan->out, plan->out, pref, 1, &result, &found);
  lib.cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED is the heuristic's way of saying "no algorithm": cuBLAS's classic GEMM takes those shapes.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) PW_CUBLAS(status);
  plan->lt = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan->lt) plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Gemm::run(DType in, DType out, int m, int n, int k, const GemmOperand& a, const GemmOperand& b, void* d, int ldd,
               long long d_stride, float alpha, float beta, int batch) {
  if (m == 0 || n == 0) return;
  const Key key{static_cast<int>(in), static_cast<int>(out), m, n, k, a.ld, b.ld, ldd, a.transpose, b.transpose,
                a.stride, b.stride, d_stride, batch};
  Plan& p = plan_for(key, in, out, m, n, k, a, b, ldd, d_stride, batch);
  const CublasLibrary& lib = cublas();
  if (p.lt) {
    PW_CUBLAS(lib.cublasLtMatmul(lt_, p.desc, &alpha, b.data, p.first, a.data, p.second, &beta, d, p.out, d, p.out,
                                 &p.algo, workspace_->data(), kWorkspaceBytes, stream_));
    return;
  }
  PW_CUBLAS(lib.cublasGemmStridedBatchedEx(blas_, b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b.data,
                                           cuda_type(in), b.ld, b.stride, a.data, cuda_type(in), a.ld, a.stride,
                                           &beta, d, cuda_type(out), ldd, d_stride, batch, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
}

}  // namespace pw::cuda
