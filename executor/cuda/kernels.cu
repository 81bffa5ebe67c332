#include "executor/cuda/kernels.cuh"

#include <cuda_bf16.h>

#include "executor/cuda/cuda_check.hpp"

namespace pw::cuda {
namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float ld(const float* p, long i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16* p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16* p, long i, float v) { p[i] = __float2bfloat16(v); }

constexpr int kThreads = 256;

int blocks_for(long count) {
  const long b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535L * 32 ? (b < 1 ? 1 : b) : 65535L * 32);
}

// Sum over the block; `scratch` holds 32 floats. Every thread gets the result.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? scratch[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#define PW_GRID_LOOP(i, count) \
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (count); i += static_cast<long>(gridDim.x) * blockDim.x)

// Runs `body` with T the storage type of `dtype`.
#define PW_DISPATCH(dtype, ...)      \
  do {                               \
    if ((dtype) == DType::F32) {     \
      using T = float;               \
      __VA_ARGS__;                   \
    } else {                         \
      using T = bf16;                \
      __VA_ARGS__;                   \
    }                                \
  } while (0)

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail_cuda(e, kernel, __FILE__, __LINE__);
}

// ---- embedding ----

template <typename T>
__global__ void embedding_forward_k(const int* tokens, const T* table, const T* positions, int n, int h, int seq, T* out) {
  PW_GRID_LOOP(i, static_cast<long>(n) * h) {
    const long r = i / h, c = i % h;
    float v = ld(table, static_cast<long>(tokens[r]) * h + c);
    if (positions) v += ld(positions, (r % seq) * h + c);
    st(out, i, v);
  }
}

template <typename T>
__global__ void embedding_backward_k(const int* tokens, const T* dy, int n, int h, int seq, float* dtable, float* dpos) {
  PW_GRID_LOOP(i, static_cast<long>(n) * h) {
    const long r = i / h, c = i % h;
    const float g = ld(dy, i);
    atomicAdd(dtable + static_cast<long>(tokens[r]) * h + c, g);
    if (dpos) atomicAdd(dpos + (r % seq) * h + c, g);
  }
}

// ---- norms: one block per row ----

template <typename T>
__global__ void norm_forward_k(bool layer_norm, const T* x, const T* gamma, const T* beta, int h, T* xhat, float* rstd,
                               T* y) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const T* xr = x + row * h;
  float mean = 0;
  if (layer_norm) {
    float s = 0;
    for (int c = threadIdx.x; c < h; c += blockDim.x) s += ld(xr, c);
    mean = block_sum(s, scratch) / h;
  }
  float ss = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = ld(xr, c) - mean;
    ss += d * d;
  }
  const float r = rsqrtf(block_sum(ss, scratch) / h + 1e-5f);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float xh = (ld(xr, c) - mean) * r;
    st(xhat, row * h + c, xh);
    float v = xh * ld(gamma, c);
    if (beta) v += ld(beta, c);
    st(y, row * h + c, v);
  }
}

template <typename T>
__global__ void norm_backward_input_k(bool layer_norm, const T* dy, const T* gamma, const T* xhat, const float* rstd,
                                      const T* residual, int h, T* dx) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const long base = row * h;
  float sum_gx = 0, sum_g = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = ld(dy, base + c) * ld(gamma, c);
    sum_gx += g * ld(xhat, base + c);
    sum_g += g;
  }
  const float mean_gx = block_sum(sum_gx, scratch) / h;
  const float mean_g = layer_norm ? block_sum(sum_g, scratch) / h : 0.0f;
  const float r = rstd[row];
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = ld(dy, base + c) * ld(gamma, c);
    float v = r * (g - mean_g - ld(xhat, base + c) * mean_gx);
    if (residual) v += ld(residual, base + c);
    st(dx, base + c, v);
  }
}

// One thread per column walks a slice of the rows; slices add atomically.
template <typename T>
__global__ void column_sums_k(const T* dy, const T* xhat, int n, int cols, int rows_per_slice, float* dgamma, float* dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const long first = static_cast<long>(blockIdx.y) * rows_per_slice;
  const long last = min(static_cast<long>(n), first + rows_per_slice);
  float sg = 0, sb = 0;
  for (long r = first; r < last; ++r) {
    const float g = ld(dy, r * cols + c);
    sb += g;
    if (dgamma) sg += g * ld(xhat, r * cols + c);
  }
  if (dgamma) atomicAdd(dgamma + c, sg);
  if (dbeta) atomicAdd(dbeta + c, sb);
}

template <typename T>
__global__ void add_bias_k(T* y, const T* bias, int n, int cols) {
  PW_GRID_LOOP(i, static_cast<long>(n) * cols) st(y, i, ld(y, i) + ld(bias, i % cols));
}

// ---- attention ----

// Rotate the pair (d, d +- half) of a head's vector at `pos` (sign -1: rotate back).
template <typename Read>
__device__ float rotated(Read read, int d, int half, const float* cos, const float* sin, int pos, float sign) {
  if (!cos) return read(d);
  const int i = d < half ? d : d - half;
  const float c = cos[pos * half + i], s = sign * sin[pos * half + i];
  const float x0 = read(i), x1 = read(half + i);
  return d < half ? x0 * c - x1 * s : x1 * c + x0 * s;
}

template <typename T>
__global__ void attention_split_k(const T* qkv, const float* cos, const float* sin, int batch, int seq, int heads,
                                  int kv_heads, int hd, T* qh, T* kh, T* vh) {
  const int q = heads * hd, kv = kv_heads * hd, width = q + 2 * kv, half = hd / 2, group = heads / kv_heads;
  PW_GRID_LOOP(i, static_cast<long>(batch) * heads * seq * hd) {
    const int d = static_cast<int>(i % hd);
    const int pos = static_cast<int>((i / hd) % seq);
    const int j = static_cast<int>((i / (static_cast<long>(hd) * seq)) % heads);
    const int b = static_cast<int>(i / (static_cast<long>(hd) * seq * heads));
    const long row = (static_cast<long>(b) * seq + pos) * width;
    const int g = j / group;
    const T* qrow = qkv + row + j * hd;
    const T* krow = qkv + row + q + g * hd;
    st(qh, i, rotated([&](int e) { return ld(qrow, e); }, d, half, cos, sin, pos, 1.0f));
    st(kh, i, rotated([&](int e) { return ld(krow, e); }, d, half, cos, sin, pos, 1.0f));
    st(vh, i, ld(qkv, row + q + kv + g * hd + d));
  }
}

// One block per row; positions after the row's own are masked out (probability 0).
template <typename T>
__global__ void causal_softmax_k(const float* scores, int seq, T* probs) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const int pos = static_cast<int>(row % seq);
  const float* s = scores + row * seq;
  float top = -INFINITY;
  for (int c = threadIdx.x; c <= pos; c += blockDim.x) top = fmaxf(top, s[c]);
  top = block_max(top, scratch);
  float sum = 0;
  for (int c = threadIdx.x; c <= pos; c += blockDim.x) sum += __expf(s[c] - top);
  sum = block_sum(sum, scratch);
  for (int c = threadIdx.x; c < seq; c += blockDim.x) st(probs, row * seq + c, c <= pos ? __expf(s[c] - top) / sum : 0.0f);
}

template <typename T>
__global__ void softmax_backward_k(const T* probs, const float* dprobs, float scale, int seq, T* dscores) {
  __shared__ float scratch[32];
  const long base = blockIdx.x * static_cast<long>(seq);
  float dot = 0;
  for (int c = threadIdx.x; c < seq; c += blockDim.x) dot += ld(probs, base + c) * dprobs[base + c];
  dot = block_sum(dot, scratch);
  for (int c = threadIdx.x; c < seq; c += blockDim.x) {
    const float p = ld(probs, base + c);
    st(dscores, base + c, p * (dprobs[base + c] - dot) * scale);
  }
}

// Index of (b, j, pos, d) in a head-major tensor.
__device__ __forceinline__ long head_major(int b, int j, int pos, int d, int heads, int seq, int hd) {
  return ((static_cast<long>(b) * heads + j) * seq + pos) * hd + d;
}

template <typename T>
__global__ void attention_merge_k(const float* oh, int batch, int seq, int heads, int hd, T* out) {
  const int width = heads * hd;
  PW_GRID_LOOP(i, static_cast<long>(batch) * seq * width) {
    const long r = i / width;
    const int c = static_cast<int>(i % width);
    st(out, i, oh[head_major(static_cast<int>(r / seq), c / hd, static_cast<int>(r % seq), c % hd, heads, seq, hd)]);
  }
}

template <typename T>
__global__ void attention_split_grad_k(const T* dout, int batch, int seq, int heads, int hd, T* doh) {
  const int width = heads * hd;
  PW_GRID_LOOP(i, static_cast<long>(batch) * seq * width) {
    const long r = i / width;
    const int c = static_cast<int>(i % width);
    doh[head_major(static_cast<int>(r / seq), c / hd, static_cast<int>(r % seq), c % hd, heads, seq, hd)] = dout[i];
  }
}

template <typename T>
__global__ void attention_merge_grad_k(const float* dqh, const float* dkh, const float* dvh, const float* cos,
                                       const float* sin, int batch, int seq, int heads, int kv_heads, int hd, T* dqkv) {
  const int q = heads * hd, kv = kv_heads * hd, width = q + 2 * kv, half = hd / 2, group = heads / kv_heads;
  PW_GRID_LOOP(i, static_cast<long>(batch) * seq * width) {
    const long r = i / width;
    const int c = static_cast<int>(i % width);
    const int b = static_cast<int>(r / seq), pos = static_cast<int>(r % seq);
    float v;
    if (c < q) {
      const int j = c / hd;
      v = rotated([&](int e) { return dqh[head_major(b, j, pos, e, heads, seq, hd)]; }, c % hd, half, cos, sin, pos, -1.0f);
    } else if (c < q + kv) {
      const int g = (c - q) / hd;
      const auto summed = [&](int e) {
        float s = 0;
        for (int j = g * group; j < (g + 1) * group; ++j) s += dkh[head_major(b, j, pos, e, heads, seq, hd)];
        return s;
      };
      v = rotated(summed, (c - q) % hd, half, cos, sin, pos, -1.0f);
    } else {
      const int g = (c - q - kv) / hd, d = (c - q - kv) % hd;
      v = 0;
      for (int j = g * group; j < (g + 1) * group; ++j) v += dvh[head_major(b, j, pos, d, heads, seq, hd)];
    }
    st(dqkv, i, v);
  }
}

// ---- MLP activations ----

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

template <typename T>
__global__ void swiglu_forward_k(const T* u, long n, int f, T* g) {
  PW_GRID_LOOP(i, n * f) {
    const long r = i / f, c = i % f;
    const float gate = ld(u, r * 2 * f + c), up = ld(u, r * 2 * f + f + c);
    st(g, i, gate * sigmoid(gate) * up);
  }
}

template <typename T>
__global__ void swiglu_backward_k(const T* u, const T* dg, long n, int f, T* du) {
  PW_GRID_LOOP(i, n * f) {
    const long r = i / f, c = i % f;
    const float gate = ld(u, r * 2 * f + c), up = ld(u, r * 2 * f + f + c), d = ld(dg, i), s = sigmoid(gate);
    st(du, r * 2 * f + c, d * up * s * (1.0f + gate * (1.0f - s)));
    st(du, r * 2 * f + f + c, d * gate * s);
  }
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

template <typename T>
__global__ void gelu_forward_k(const T* u, long count, T* g) {
  PW_GRID_LOOP(i, count) {
    const float x = ld(u, i);
    st(g, i, 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x))));
  }
}

template <typename T>
__global__ void gelu_backward_k(const T* u, const T* dg, long count, T* du) {
  PW_GRID_LOOP(i, count) {
    const float x = ld(u, i);
    const float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
    const float d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
    st(du, i, ld(dg, i) * d);
  }
}

// ---- cross-entropy: one block per row ----

template <typename T>
__global__ void cross_entropy_forward_k(const T* logits, const int* targets, int n, long vocab, float* lse, float* loss) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const T* l = logits + row * vocab;
  float top = -INFINITY;
  for (long c = threadIdx.x; c < vocab; c += blockDim.x) top = fmaxf(top, ld(l, c));
  top = block_max(top, scratch);
  float sum = 0;
  for (long c = threadIdx.x; c < vocab; c += blockDim.x) sum += expf(ld(l, c) - top);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    const float z = top + logf(sum);
    lse[row] = z;
    atomicAdd(loss, (z - ld(l, targets[row])) / n);
  }
}

template <typename T>
__global__ void cross_entropy_backward_k(const T* logits, const float* lse, const int* targets, int n, long vocab,
                                         float scale, T* dlogits) {
  PW_GRID_LOOP(i, static_cast<long>(n) * vocab) {
    const long r = i / vocab, c = i % vocab;
    const float p = expf(ld(logits, i) - lse[r]) - (c == targets[r] ? 1.0f : 0.0f);
    st(dlogits, i, scale * p / n);
  }
}

// ---- conversions, optimizers, random fill ----

template <typename T>
__global__ void cast_from_f32_k(const float* src, long count, T* dst) {
  PW_GRID_LOOP(i, count) st(dst, i, src[i]);
}

template <typename T>
__global__ void cast_to_f32_k(const T* src, long count, float* dst) {
  PW_GRID_LOOP(i, count) dst[i] = ld(src, i);
}

__global__ void adam_k(float* w, float* g, float* m, float* v, long count, float lr, float b1, float b2, float eps, float c1,
                       float c2) {
  PW_GRID_LOOP(i, count) {
    const float grad = g[i];
    const float mi = b1 * m[i] + (1 - b1) * grad;
    const float vi = b2 * v[i] + (1 - b2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
    g[i] = 0;
  }
}

__global__ void sgd_k(float* w, float* g, long count, float lr) {
  PW_GRID_LOOP(i, count) {
    w[i] -= lr * g[i];
    g[i] = 0;
  }
}

// a is rows x cols, b cols x rows: a[i][j] += b[j][i].
__global__ void add_transposed_k(float* a, const float* b, long rows, long cols) {
  PW_GRID_LOOP(k, rows * cols) {
    const long i = k / cols, j = k % cols;
    a[k] += b[j * rows + i];
  }
}

// Both hold a[i][j] + b[j][i] (each pair of elements touched by one thread only).
__global__ void sum_transposed_pair_k(float* a, float* b, long rows, long cols) {
  PW_GRID_LOOP(k, rows * cols) {
    const long i = k / cols, j = k % cols;
    const float s = a[k] + b[j * rows + i];
    a[k] = s;
    b[j * rows + i] = s;
  }
}

__device__ __forceinline__ std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_normal_k(T* data, long count, std::uint64_t seed, float stddev) {
  PW_GRID_LOOP(i, count) {
    const std::uint64_t h = splitmix(seed ^ splitmix(static_cast<std::uint64_t>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) / 16777217.0f;  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xffffff) / 16777216.0f;
    st(data, i, stddev * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

}  // namespace

void embedding_forward(DType t, const int* tokens, const void* table, const void* positions, int n, int hidden, int seq,
                       void* out, cudaStream_t stream) {
  PW_DISPATCH(t, embedding_forward_k<T><<<blocks_for(static_cast<long>(n) * hidden), kThreads, 0, stream>>>(
                     tokens, static_cast<const T*>(table), static_cast<const T*>(positions), n, hidden, seq,
                     static_cast<T*>(out)));
  check_launch("embedding_forward_k");
}

void embedding_backward_weight(DType t, const int* tokens, const void* dy, int n, int hidden, int seq, float* dtable,
                               float* dpositions, cudaStream_t stream) {
  PW_DISPATCH(t, embedding_backward_k<T><<<blocks_for(static_cast<long>(n) * hidden), kThreads, 0, stream>>>(
                     tokens, static_cast<const T*>(dy), n, hidden, seq, dtable, dpositions));
  check_launch("embedding_backward_k");
}

void norm_forward(DType t, bool layer_norm, const void* x, const void* gamma, const void* beta, int n, int h, void* xhat,
                  float* rstd, void* y, cudaStream_t stream) {
  if (n == 0) return;
  PW_DISPATCH(t, norm_forward_k<T><<<n, kThreads, 0, stream>>>(layer_norm, static_cast<const T*>(x),
                                                              static_cast<const T*>(gamma), static_cast<const T*>(beta), h,
                                                              static_cast<T*>(xhat), rstd, static_cast<T*>(y)));
  check_launch("norm_forward_k");
}

void norm_backward_input(DType t, bool layer_norm, const void* dy, const void* gamma, const void* xhat, const float* rstd,
                         const void* residual, int n, int h, void* dx, cudaStream_t stream) {
  if (n == 0) return;
  PW_DISPATCH(t, norm_backward_input_k<T><<<n, kThreads, 0, stream>>>(
                     layer_norm, static_cast<const T*>(dy), static_cast<const T*>(gamma), static_cast<const T*>(xhat), rstd,
                     static_cast<const T*>(residual), h, static_cast<T*>(dx)));
  check_launch("norm_backward_input_k");
}

void column_sums(DType t, const void* dy, const void* xhat, int n, int cols, float* dgamma, float* dbeta,
                 cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  constexpr int kRowsPerSlice = 256;
  const dim3 grid((cols + kThreads - 1) / kThreads, (n + kRowsPerSlice - 1) / kRowsPerSlice);
  PW_DISPATCH(t, column_sums_k<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(dy), static_cast<const T*>(xhat), n,
                                                                cols, kRowsPerSlice, dgamma, dbeta));
  check_launch("column_sums_k");
}

void add_bias(DType t, void* y, const void* bias, int n, int cols, cudaStream_t stream) {
  PW_DISPATCH(t, add_bias_k<T><<<blocks_for(static_cast<long>(n) * cols), kThreads, 0, stream>>>(
                     static_cast<T*>(y), static_cast<const T*>(bias), n, cols));
  check_launch("add_bias_k");
}

void attention_split(DType t, const void* qkv, const float* cos, const float* sin, int batch, int seq, int heads,
                     int kv_heads, int head_dim, void* qh, void* kh, void* vh, cudaStream_t stream) {
  PW_DISPATCH(t, attention_split_k<T><<<blocks_for(static_cast<long>(batch) * heads * seq * head_dim), kThreads, 0, stream>>>(
                     static_cast<const T*>(qkv), cos, sin, batch, seq, heads, kv_heads, head_dim, static_cast<T*>(qh),
                     static_cast<T*>(kh), static_cast<T*>(vh)));
  check_launch("attention_split_k");
}

void causal_softmax(DType t, const float* scores, long rows, int seq, void* probs, cudaStream_t stream) {
  if (rows == 0) return;
  PW_DISPATCH(t, causal_softmax_k<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(scores, seq, static_cast<T*>(probs)));
  check_launch("causal_softmax_k");
}

void softmax_backward(DType t, const void* probs, const float* dprobs, float scale, long rows, int seq, void* dscores,
                      cudaStream_t stream) {
  if (rows == 0) return;
  PW_DISPATCH(t, softmax_backward_k<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
                     static_cast<const T*>(probs), dprobs, scale, seq, static_cast<T*>(dscores)));
  check_launch("softmax_backward_k");
}

void attention_merge(DType t, const float* oh, int batch, int seq, int heads, int head_dim, void* out, cudaStream_t stream) {
  PW_DISPATCH(t, attention_merge_k<T><<<blocks_for(static_cast<long>(batch) * seq * heads * head_dim), kThreads, 0, stream>>>(
                     oh, batch, seq, heads, head_dim, static_cast<T*>(out)));
  check_launch("attention_merge_k");
}

void attention_split_grad(DType t, const void* dout, int batch, int seq, int heads, int head_dim, void* doh,
                          cudaStream_t stream) {
  PW_DISPATCH(t, attention_split_grad_k<T><<<blocks_for(static_cast<long>(batch) * seq * heads * head_dim), kThreads, 0,
                                             stream>>>(static_cast<const T*>(dout), batch, seq, heads, head_dim,
                                                       static_cast<T*>(doh)));
  check_launch("attention_split_grad_k");
}

void attention_merge_grad(DType t, const float* dqh, const float* dkh, const float* dvh, const float* cos,
                          const float* sin, int batch, int seq, int heads, int kv_heads, int head_dim, void* dqkv,
                          cudaStream_t stream) {
  const long width = static_cast<long>(heads + 2 * kv_heads) * head_dim;
  PW_DISPATCH(t, attention_merge_grad_k<T><<<blocks_for(static_cast<long>(batch) * seq * width), kThreads, 0, stream>>>(
                     dqh, dkh, dvh, cos, sin, batch, seq, heads, kv_heads, head_dim, static_cast<T*>(dqkv)));
  check_launch("attention_merge_grad_k");
}

void swiglu_forward(DType t, const void* u, long n, int f, void* g, cudaStream_t stream) {
  PW_DISPATCH(t, swiglu_forward_k<T><<<blocks_for(n * f), kThreads, 0, stream>>>(static_cast<const T*>(u), n, f,
                                                                                static_cast<T*>(g)));
  check_launch("swiglu_forward_k");
}

void swiglu_backward(DType t, const void* u, const void* dg, long n, int f, void* du, cudaStream_t stream) {
  PW_DISPATCH(t, swiglu_backward_k<T><<<blocks_for(n * f), kThreads, 0, stream>>>(
                     static_cast<const T*>(u), static_cast<const T*>(dg), n, f, static_cast<T*>(du)));
  check_launch("swiglu_backward_k");
}

void gelu_forward(DType t, const void* u, long count, void* g, cudaStream_t stream) {
  PW_DISPATCH(t, gelu_forward_k<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const T*>(u), count,
                                                                              static_cast<T*>(g)));
  check_launch("gelu_forward_k");
}

void gelu_backward(DType t, const void* u, const void* dg, long count, void* du, cudaStream_t stream) {
  PW_DISPATCH(t, gelu_backward_k<T><<<blocks_for(count), kThreads, 0, stream>>>(
                     static_cast<const T*>(u), static_cast<const T*>(dg), count, static_cast<T*>(du)));
  check_launch("gelu_backward_k");
}

void cross_entropy_forward(DType t, const void* logits, const int* targets, int n, long vocab, float* lse, float* loss,
                           cudaStream_t stream) {
  if (n == 0) return;
  PW_DISPATCH(t, cross_entropy_forward_k<T><<<n, kThreads, 0, stream>>>(static_cast<const T*>(logits), targets, n, vocab,
                                                                       lse, loss));
  check_launch("cross_entropy_forward_k");
}

void cross_entropy_backward(DType t, const void* logits, const float* lse, const int* targets, int n, long vocab,
                            float scale, void* dlogits, cudaStream_t stream) {
  PW_DISPATCH(t, cross_entropy_backward_k<T><<<blocks_for(static_cast<long>(n) * vocab), kThreads, 0, stream>>>(
                     static_cast<const T*>(logits), lse, targets, n, vocab, scale, static_cast<T*>(dlogits)));
  check_launch("cross_entropy_backward_k");
}

void cast_from_f32(DType t, const float* src, long count, void* dst, cudaStream_t stream) {
  PW_DISPATCH(t, cast_from_f32_k<T><<<blocks_for(count), kThreads, 0, stream>>>(src, count, static_cast<T*>(dst)));
  check_launch("cast_from_f32_k");
}

void cast_to_f32(DType t, const void* src, long count, float* dst, cudaStream_t stream) {
  PW_DISPATCH(t, cast_to_f32_k<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const T*>(src), count, dst));
  check_launch("cast_to_f32_k");
}

void adam_step(float* w, float* g, float* m, float* v, long count, float lr, float beta1, float beta2, float eps,
               float bias1, float bias2, cudaStream_t stream) {
  adam_k<<<blocks_for(count), kThreads, 0, stream>>>(w, g, m, v, count, lr, beta1, beta2, eps, bias1, bias2);
  check_launch("adam_k");
}

void sgd_step(float* w, float* g, long count, float lr, cudaStream_t stream) {
  sgd_k<<<blocks_for(count), kThreads, 0, stream>>>(w, g, count, lr);
  check_launch("sgd_k");
}

void add_transposed(float* a, const float* b, long rows, long cols, cudaStream_t stream) {
  add_transposed_k<<<blocks_for(rows * cols), kThreads, 0, stream>>>(a, b, rows, cols);
  check_launch("add_transposed_k");
}

void sum_transposed_pair(float* a, float* b, long rows, long cols, cudaStream_t stream) {
  sum_transposed_pair_k<<<blocks_for(rows * cols), kThreads, 0, stream>>>(a, b, rows, cols);
  check_launch("sum_transposed_pair_k");
}

void fill_normal(DType t, void* data, long count, std::uint64_t seed, float stddev, cudaStream_t stream) {
  PW_DISPATCH(t, fill_normal_k<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, seed, stddev));
  check_launch("fill_normal_k");
}

}  // namespace pw::cuda
