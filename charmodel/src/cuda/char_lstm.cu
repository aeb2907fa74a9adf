// The character model's encoder on a CUDA device (device_encoder.h says what runs where).
// Products by cuBLAS (row-major operands through Gemm below), the LSTM's unit math from
// lstm_element.h in one kernel per step and direction.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "../device_encoder.h"
#include "streamvec/charmodel/lstm_element.h"

namespace streamvec::internal {
namespace {

// Sigmoid and tanh for lstm_element.h on the device: __expf, the hardware's exp2 with a scaled
// argument (about 2 ulp over the LSTM's range), and the CUDA math library's tanhf.
struct DeviceMath {
  SV_HOST_DEVICE static float Sigmoid(float x) {
#if defined(__CUDA_ARCH__)
    return 1.0f / (1.0f + __expf(-x));
#else
    return 1.0f / (1.0f + expf(-x));
#endif
  }
  SV_HOST_DEVICE static float Tanh(float x) { return tanhf(x); }
};

constexpr int kThreads = 256;

int Blocks(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

Status CudaError(cudaError_t e, const char* what) {
  return Status::Internal(std::string("CUDA character encoder: ") + what + ": " +
                          cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// cuBLAS, loaded when the first device encoder is made rather than linked: its libraries (about
// 600 MB) would otherwise load with every streamvec process (0.37 s and 240 MB resident for
// `streamvec --version` against 0.04 s and 28 MB), and only this encoder uses them.
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemv_v2) sgemv;
  decltype(&cublasGetStatusName) status_name;
};

// The loaded library, or FailedPrecondition naming what could not be loaded.
StatusOr<const Cublas*> LoadCublas() {
  static const std::string kName = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  static Cublas api;
  static const std::string error = []() -> std::string {
    void* lib = dlopen(kName.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      return "cannot load cuBLAS (" + kName + "): " + (why != nullptr ? why : "dlopen failed");
    }
    auto find = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
      return *fn != nullptr;
    };
    if (!find(&api.create, "cublasCreate_v2") || !find(&api.destroy, "cublasDestroy_v2") ||
        !find(&api.set_stream, "cublasSetStream_v2") || !find(&api.sgemm, "cublasSgemm_v2") ||
        !find(&api.sgemv, "cublasSgemv_v2") || !find(&api.status_name, "cublasGetStatusName")) {
      return kName + " lacks a cuBLAS function this build calls";
    }
    return {};
  }();
  if (!error.empty()) return Status::FailedPrecondition(error);
  return &api;
}

Status CublasError(const Cublas& api, cublasStatus_t s, const char* what) {
  return Status::Internal(std::string("CUDA character encoder: ") + what + ": cuBLAS " +
                          api.status_name(s));
}

#define SV_CUDA_RETURN(expr, what)                         \
  do {                                                     \
    const cudaError_t sv_e = (expr);                       \
    if (sv_e != cudaSuccess) return CudaError(sv_e, what); \
  } while (0)

#define SV_CUBLAS_RETURN(expr, what)                                               \
  do {                                                                             \
    const cublasStatus_t sv_s = (expr);                                            \
    if (sv_s != CUBLAS_STATUS_SUCCESS) return CublasError(*blas_api_, sv_s, what); \
  } while (0)

// out[u] = table[rows[u]] for u < n (rows of `cols` floats).
__global__ void GatherRows(const float* table, int cols, const int32_t* rows, int n, float* out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * cols) return;
  const size_t u = i / cols, k = i % cols;
  out[i] = table[size_t(rows[u]) * cols + k];
}

// table[rows[u]] += add[u] for u < n; rows are distinct.
__global__ void ScatterAddRows(const float* add, int cols, const int32_t* rows, int n,
                               float* table) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * cols) return;
  const size_t u = i / cols, k = i % cols;
  table[size_t(rows[u]) * cols + k] += add[i];
}

// Every row of y (rows x cols) set to bias.
__global__ void FillRows(const float* bias, int cols, size_t rows, float* y) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  y[i] = bias[i % cols];
}

// The words a step reads: where word r's character at step t is in `ids`.
struct StepWords {
  const int32_t* ids;      // n x max_len
  const int32_t* lengths;  // n
  int max_len;
  int t;
  int reverse;  // the backward direction reads position T - 1 - t
  __device__ int Char(int r) const {
    const int pos = reverse ? lengths[r] - 1 - t : t;
    return ids[size_t(r) * max_len + pos];
  }
};

// One forward step for words r < rows: gates (rows x 4H) hold h_prev Wh on entry; adds the
// character's row of xw (E Wx) and runs the unit math; gates become i, f, g, o. c_prev (rows x
// H) is read; tanh_c (rows x H) written; h and c go to h_next / c_next for the words that read
// on (r < rows_next), and h to the word's columns of hcat (its final state after its last step).
__global__ void ForwardStep(StepWords w, int rows, int H, const float* xw, const float* b,
                            float* gates, const float* c_prev, float* tanh_c, float* h_next,
                            float* c_next, int rows_next, float* hcat, int hcat_ld, int hcat_col) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(rows) * H) return;
  const int r = static_cast<int>(i / H), j = static_cast<int>(i % H);
  const float* x = xw + size_t(w.Char(r)) * 4 * H;
  float* a = gates + size_t(r) * 4 * H;
  float gi, gf, gg, go, c, tc, h;
  LstmUnitForward<float, DeviceMath>(a[j] + x[j], a[H + j] + x[H + j], a[2 * H + j] + x[2 * H + j],
                                     a[3 * H + j] + x[3 * H + j], b[j], b[H + j], b[2 * H + j],
                                     b[3 * H + j], c_prev[i], gi, gf, gg, go, c, tc, h);
  a[j] = gi;
  a[H + j] = gf;
  a[2 * H + j] = gg;
  a[3 * H + j] = go;
  tanh_c[i] = tc;
  if (r < rows_next) {
    h_next[i] = h;
    c_next[i] = c;
  }
  hcat[size_t(r) * hcat_ld + hcat_col + j] = h;
}

// One backward step for words r < rows: gates (rows x 4H) become dL/da; dc (n x H) holds dL/dc
// and becomes dL/dc_prev; dh (n x H) is read; the character's row of dxw (U x 4H) gets dL/da.
__global__ void BackwardStep(StepWords w, int rows, int H, float* gates, const float* tanh_c,
                             const float* c_prev, const float* dh, float* dc, float* dxw) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(rows) * H) return;
  const int r = static_cast<int>(i / H), j = static_cast<int>(i % H);
  float* a = gates + size_t(r) * 4 * H;
  float di, df, dg, d_o, dcp;
  LstmUnitBackward<float, DeviceMath>(a[j], a[H + j], a[2 * H + j], a[3 * H + j], tanh_c[i],
                                      c_prev[i], dh[i], dc[i], di, df, dg, d_o, dcp);
  a[j] = di;
  a[H + j] = df;
  a[2 * H + j] = dg;
  a[3 * H + j] = d_o;
  dc[i] = dcp;
  float* dx = dxw + size_t(w.Char(r)) * 4 * H;
  atomicAdd(dx + j, di);
  atomicAdd(dx + H + j, df);
  atomicAdd(dx + 2 * H + j, dg);
  atomicAdd(dx + 3 * H + j, d_o);
}

// Device memory from the stream's pool (cudaMallocAsync), freed on the stream.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Free(); }
  Status Allocate(size_t bytes, cudaStream_t stream, const char* what) {
    Free();
    stream_ = stream;
    if (bytes == 0) return Status::Ok();
    SV_CUDA_RETURN(cudaMallocAsync(&p_, bytes, stream), what);
    return Status::Ok();
  }
  void Free() {
    if (p_ != nullptr) cudaFreeAsync(p_, stream_);
    p_ = nullptr;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

class DeviceEncoder {
 public:
  DeviceEncoder(int ordinal, const CharLayout& layout) : ordinal_(ordinal), layout_(layout) {}
  ~DeviceEncoder() {
    cudaSetDevice(ordinal_);
    params_.Free();
    ones_.Free();
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (blas_ != nullptr) blas_api_->destroy(blas_);
    if (staging_ != nullptr) cudaFreeHost(staging_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init() {
    StatusOr<const Cublas*> api = LoadCublas();
    if (!api.ok()) return api.status();
    blas_api_ = *api;
    // No usable device (no driver, a driver too old, no device `ordinal`): a precondition.
    if (const cudaError_t e = cudaSetDevice(ordinal_); e != cudaSuccess) {
      cudaGetLastError();
      return Status::FailedPrecondition("CUDA device " + std::to_string(ordinal_) + ": " +
                                        cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
    }
    SV_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "a stream");
    // Freed pass buffers stay in the device's pool for the next pass (no cudaMalloc per pass).
    cudaMemPool_t pool;
    SV_CUDA_RETURN(cudaDeviceGetDefaultMemPool(&pool, ordinal_), "the memory pool");
    uint64_t keep = UINT64_MAX;
    SV_CUDA_RETURN(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                   "the memory pool");
    SV_CUBLAS_RETURN(blas_api_->create(&blas_), "cublasCreate");
    SV_CUBLAS_RETURN(blas_api_->set_stream(blas_, stream_), "cublasSetStream");
    SV_RETURN_IF_ERROR(params_.Allocate(layout_.total * sizeof(float), stream_, "parameters"));
    return Status::Ok();
  }

  // Row-major C (m x n, leading dimension ldc) = op(A) op(B) + beta C, op transposing when ta /
  // tb; A and B row-major with leading dimensions lda, ldb. cuBLAS is column-major: a row-major
  // matrix is its transpose there, so this computes C^T = op(B)^T op(A)^T.
  Status Gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc) {
    if (m == 0 || n == 0) return Status::Ok();
    const float one = 1.0f;
    SV_CUBLAS_RETURN(
        blas_api_->sgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
                         m, k, &one, b, ldb, a, lda, &beta, c, ldc),
        "sgemm");
    return Status::Ok();
  }

  // y (cols) += the sum of the rows of x (rows x cols, row-major).
  Status AddColumnSums(const float* x, size_t rows, int cols, float* y) {
    if (rows == 0) return Status::Ok();
    SV_RETURN_IF_ERROR(EnsureOnes(rows));
    const float one = 1.0f;
    SV_CUBLAS_RETURN(blas_api_->sgemv(blas_, CUBLAS_OP_N, cols, static_cast<int>(rows), &one, x,
                                      cols, ones_.as<float>(), 1, &one, y, 1),
                     "sgemv");
    return Status::Ok();
  }

  Status EnsureOnes(size_t n) {
    if (n <= ones_size_) return Status::Ok();
    SV_RETURN_IF_ERROR(ones_.Allocate(n * sizeof(float), stream_, "ones"));
    std::vector<float> ones(n, 1.0f);
    SV_CUDA_RETURN(cudaMemcpyAsync(ones_.as<float>(), ones.data(), n * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_),
                   "ones");
    SV_CUDA_RETURN(cudaStreamSynchronize(stream_), "ones");  // `ones` is freed on return
    ones_size_ = n;
    return Status::Ok();
  }

  // Pinned host memory of at least `bytes` for a call's copies (grown, never shrunk): copies
  // from pageable memory go through the driver's own staging at a fraction of the bus's speed.
  // Called at the start of a call, when no copy of the previous one is pending.
  Status ReserveStaging(size_t bytes) {
    if (bytes <= staging_bytes_) return Status::Ok();
    SV_CUDA_RETURN(cudaStreamSynchronize(stream_), "the stream");
    if (staging_ != nullptr) cudaFreeHost(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
    const size_t grown = bytes + bytes / 2;
    SV_CUDA_RETURN(cudaMallocHost(reinterpret_cast<void**>(&staging_), grown),
                   "pinned host memory");
    staging_bytes_ = grown;
    return Status::Ok();
  }

  // Enqueues a copy of src (host, `bytes`) to dst (device) through the staging memory at *at,
  // then moves *at past it (256-byte aligned).
  Status Up(void* dst, const void* src, size_t bytes, size_t* at, const char* what) {
    if (bytes == 0) return Status::Ok();
    std::memcpy(staging_ + *at, src, bytes);
    SV_CUDA_RETURN(cudaMemcpyAsync(dst, staging_ + *at, bytes, cudaMemcpyHostToDevice, stream_),
                   what);
    *at += (bytes + 255) / 256 * 256;
    return Status::Ok();
  }

  Status Forward(const float* params, uint64_t version, const DeviceWords& words, float* out,
                 std::shared_ptr<DevicePass>* pass);
  Status Backward(DevicePass* pass, const float* d_out, float* gradient);

  std::mutex mu;  // one pass at a time on the stream

 private:
  const float* P(size_t at) const { return params_.as<float>() + at; }

  int ordinal_;
  CharLayout layout_;
  cudaStream_t stream_ = nullptr;
  const Cublas* blas_api_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Buffer params_;
  uint64_t version_ = 0;
  bool have_params_ = false;
  Buffer ones_;
  size_t ones_size_ = 0;
  char* staging_ = nullptr;  // pinned (ReserveStaging)
  size_t staging_bytes_ = 0;
};

// A forward pass's device buffers. Rows of step t of a direction start at offset[t] in gates
// (4H a row), tanh_c, h_prev and c_prev (H a row); kept passes give each step its own rows,
// others reuse two.
class DevicePass {
 public:
  int n = 0, max_len = 0, used = 0;
  uint64_t version = 0;
  bool kept = false, backward_done = false;
  std::vector<int32_t> active;       // per step: words still reading
  std::vector<size_t> gate_offset;   // per step: first row in gates / tanh_c
  std::vector<size_t> state_offset;  // per step: first row in h_prev / c_prev
  size_t gate_rows = 0, state_rows = 0;
  Buffer ids, lengths, used_rows, e_used, hcat;
  Buffer xw[2], gates[2], tanh_c[2], h_prev[2], c_prev[2];

  // The steps' buffers back to the pool (after an Encode, or once back-propagated).
  void FreeSteps() {
    for (int d = 0; d < 2; ++d) {
      xw[d].Free();
      gates[d].Free();
      tanh_c[d].Free();
      h_prev[d].Free();
      c_prev[d].Free();
    }
  }
};

Status DeviceEncoder::Forward(const float* params, uint64_t version, const DeviceWords& words,
                              float* out, std::shared_ptr<DevicePass>* keep) {
  SV_CUDA_RETURN(cudaSetDevice(ordinal_), "selecting the device");
  const CharLayout& L = layout_;
  const int H = L.hidden, G4 = 4 * H;
  const bool new_params = !have_params_ || version != version_;
  const size_t n_words = words.size(), round = 256;
  auto up_bytes = [&](size_t b) { return (b + round - 1) / round * round; };
  const size_t up = (new_params ? up_bytes(L.total * 4) : 0) + up_bytes(words.ids.size() * 4) +
                    up_bytes(n_words * 4) + up_bytes(words.used.size() * 4);
  SV_RETURN_IF_ERROR(ReserveStaging(std::max(up, n_words * L.dim * 4)));
  size_t at = 0;
  if (new_params) {
    SV_RETURN_IF_ERROR(Up(params_.as<float>(), params, L.total * 4, &at, "copying parameters"));
    version_ = version;
    have_params_ = true;
  }
  auto pass = std::make_shared<DevicePass>();
  DevicePass& p = *pass;
  p.n = static_cast<int>(words.size());
  p.max_len = words.max_len;
  p.used = static_cast<int>(words.used.size());
  p.version = version;
  p.kept = keep != nullptr;
  p.active = words.active;
  const int T = p.max_len;
  p.gate_offset.resize(T);
  p.state_offset.resize(T);
  for (int t = 0; t < T; ++t) {
    if (p.kept) {
      p.gate_offset[t] = p.gate_rows;
      p.gate_rows += size_t(p.active[t]);
    } else {
      p.gate_offset[t] = 0;
      p.gate_rows = size_t(p.n);
    }
    p.state_offset[t] = p.kept ? p.gate_offset[t] : size_t(t % 2) * p.n;
  }
  p.state_rows = p.kept ? p.gate_rows : 2 * size_t(p.n);
  const size_t n = size_t(p.n);
  if (n == 0) return Status::Ok();
  SV_RETURN_IF_ERROR(p.ids.Allocate(words.ids.size() * 4, stream_, "word characters"));
  SV_RETURN_IF_ERROR(p.lengths.Allocate(n * 4, stream_, "word lengths"));
  SV_RETURN_IF_ERROR(p.used_rows.Allocate(words.used.size() * 4, stream_, "characters"));
  SV_RETURN_IF_ERROR(p.e_used.Allocate(words.used.size() * L.char_dim * 4, stream_, "E rows"));
  SV_RETURN_IF_ERROR(p.hcat.Allocate(n * L.dirs * H * 4, stream_, "final states"));
  SV_RETURN_IF_ERROR(Up(p.ids.as<int32_t>(), words.ids.data(), words.ids.size() * 4, &at,
                        "copying word characters"));
  SV_RETURN_IF_ERROR(
      Up(p.lengths.as<int32_t>(), words.lengths.data(), n * 4, &at, "copying word lengths"));
  SV_RETURN_IF_ERROR(Up(p.used_rows.as<int32_t>(), words.used.data(), words.used.size() * 4, &at,
                        "copying characters"));
  const int U = p.used;
  GatherRows<<<Blocks(size_t(U) * L.char_dim), kThreads, 0, stream_>>>(
      P(L.emb), L.char_dim, p.used_rows.as<int32_t>(), U, p.e_used.as<float>());
  for (int d = 0; d < L.dirs; ++d) {
    SV_RETURN_IF_ERROR(p.xw[d].Allocate(size_t(U) * G4 * 4, stream_, "E Wx"));
    SV_RETURN_IF_ERROR(p.gates[d].Allocate(p.gate_rows * G4 * 4, stream_, "gates"));
    SV_RETURN_IF_ERROR(p.tanh_c[d].Allocate(p.gate_rows * H * 4, stream_, "tanh(c)"));
    SV_RETURN_IF_ERROR(p.h_prev[d].Allocate(p.state_rows * H * 4, stream_, "h"));
    SV_RETURN_IF_ERROR(p.c_prev[d].Allocate(p.state_rows * H * 4, stream_, "c"));
    SV_RETURN_IF_ERROR(Gemm(false, false, U, G4, L.char_dim, p.e_used.as<float>(), L.char_dim,
                            P(L.wx[d]), G4, 0.0f, p.xw[d].as<float>(), G4));
    // Step 0 starts from h = c = 0.
    SV_CUDA_RETURN(cudaMemsetAsync(p.h_prev[d].as<float>() + p.state_offset[0] * H, 0,
                                   size_t(p.active[0]) * H * 4, stream_),
                   "h0");
    SV_CUDA_RETURN(cudaMemsetAsync(p.c_prev[d].as<float>() + p.state_offset[0] * H, 0,
                                   size_t(p.active[0]) * H * 4, stream_),
                   "c0");
    for (int t = 0; t < T; ++t) {
      const int rows = p.active[t];
      const int rows_next = t + 1 < T ? p.active[t + 1] : 0;
      float* g = p.gates[d].as<float>() + p.gate_offset[t] * G4;
      const float* hp = p.h_prev[d].as<float>() + p.state_offset[t] * H;
      if (t == 0) {
        SV_CUDA_RETURN(cudaMemsetAsync(g, 0, size_t(rows) * G4 * 4, stream_), "gates");
      } else {
        SV_RETURN_IF_ERROR(Gemm(false, false, rows, G4, H, hp, H, P(L.wh[d]), G4, 0.0f, g, G4));
      }
      const size_t next = t + 1 < T ? p.state_offset[t + 1] * H : 0;
      const StepWords sw{p.ids.as<int32_t>(), p.lengths.as<int32_t>(), T, t, d == 1};
      ForwardStep<<<Blocks(size_t(rows) * H), kThreads, 0, stream_>>>(
          sw, rows, H, p.xw[d].as<float>(), P(L.b[d]), g,
          p.c_prev[d].as<float>() + p.state_offset[t] * H,
          p.tanh_c[d].as<float>() + p.gate_offset[t] * H, p.h_prev[d].as<float>() + next,
          p.c_prev[d].as<float>() + next, rows_next, p.hcat.as<float>(), L.dirs * H, d * H);
    }
  }
  SV_CUDA_RETURN(cudaGetLastError(), "a forward kernel");
  Buffer y;
  SV_RETURN_IF_ERROR(y.Allocate(n * L.dim * 4, stream_, "outputs"));
  FillRows<<<Blocks(n * L.dim), kThreads, 0, stream_>>>(P(L.proj_bias), L.dim, n, y.as<float>());
  SV_RETURN_IF_ERROR(Gemm(false, false, p.n, L.dim, L.dirs * H, p.hcat.as<float>(), L.dirs * H,
                          P(L.proj), L.dim, 1.0f, y.as<float>(), L.dim));
  // Into the staging memory (its uploads are done by then: the stream runs in order).
  SV_CUDA_RETURN(
      cudaMemcpyAsync(staging_, y.as<float>(), n * L.dim * 4, cudaMemcpyDeviceToHost, stream_),
      "copying the outputs");
  SV_CUDA_RETURN(cudaStreamSynchronize(stream_), "the forward pass");
  std::memcpy(out, staging_, n * L.dim * 4);
  if (keep != nullptr) {
    *keep = std::move(pass);
  } else {
    p.FreeSteps();
  }
  return Status::Ok();
}

Status DeviceEncoder::Backward(DevicePass* pass, const float* d_out, float* gradient) {
  DevicePass& p = *pass;
  if (!p.kept || p.backward_done) {
    return Status::FailedPrecondition("CUDA character encoder: a pass is back-propagated once");
  }
  if (p.version != version_) {
    return Status::FailedPrecondition(
        "CUDA character encoder: the parameters changed between a pass and its backward pass");
  }
  p.backward_done = true;
  SV_CUDA_RETURN(cudaSetDevice(ordinal_), "selecting the device");
  const CharLayout& L = layout_;
  const int H = L.hidden, G4 = 4 * H, T = p.max_len, U = p.used;
  const size_t n = size_t(p.n);
  SV_RETURN_IF_ERROR(ReserveStaging(std::max(n * L.dim * 4, L.total * 4)));
  Buffer grad, dy, dhcat, dh, dc, dxw, de;
  SV_RETURN_IF_ERROR(grad.Allocate(L.total * 4, stream_, "the gradient"));
  SV_CUDA_RETURN(cudaMemsetAsync(grad.as<float>(), 0, L.total * 4, stream_), "the gradient");
  float* g = grad.as<float>();
  if (n > 0) {
    SV_RETURN_IF_ERROR(dy.Allocate(n * L.dim * 4, stream_, "dL/doutputs"));
    SV_RETURN_IF_ERROR(dhcat.Allocate(n * L.dirs * H * 4, stream_, "dL/dh"));
    SV_RETURN_IF_ERROR(dh.Allocate(n * H * 4, stream_, "dL/dh"));
    SV_RETURN_IF_ERROR(dc.Allocate(n * H * 4, stream_, "dL/dc"));
    SV_RETURN_IF_ERROR(dxw.Allocate(size_t(U) * G4 * 4, stream_, "dL/d(E Wx)"));
    SV_RETURN_IF_ERROR(de.Allocate(size_t(U) * L.char_dim * 4, stream_, "dL/dE"));
    size_t at = 0;
    SV_RETURN_IF_ERROR(Up(dy.as<float>(), d_out, n * L.dim * 4, &at, "copying dL/doutputs"));
    // Projection: dP += hcat^T dy, dp += sum of dy's rows, dhcat = dy P^T.
    SV_RETURN_IF_ERROR(Gemm(true, false, L.dirs * H, L.dim, p.n, p.hcat.as<float>(), L.dirs * H,
                            dy.as<float>(), L.dim, 1.0f, g + L.proj, L.dim));
    SV_RETURN_IF_ERROR(AddColumnSums(dy.as<float>(), n, L.dim, g + L.proj_bias));
    SV_RETURN_IF_ERROR(Gemm(false, true, p.n, L.dirs * H, L.dim, dy.as<float>(), L.dim, P(L.proj),
                            L.dim, 0.0f, dhcat.as<float>(), L.dirs * H));
    for (int d = 0; d < L.dirs; ++d) {
      SV_CUDA_RETURN(cudaMemcpy2DAsync(dh.as<float>(), H * 4, dhcat.as<float>() + d * H,
                                       L.dirs * H * 4, H * 4, n, cudaMemcpyDeviceToDevice, stream_),
                     "dL/dh");
      SV_CUDA_RETURN(cudaMemsetAsync(dc.as<float>(), 0, n * H * 4, stream_), "dL/dc");
      SV_CUDA_RETURN(cudaMemsetAsync(dxw.as<float>(), 0, size_t(U) * G4 * 4, stream_),
                     "dL/d(E Wx)");
      for (int t = T - 1; t >= 0; --t) {
        const int rows = p.active[t];
        float* da = p.gates[d].as<float>() + p.gate_offset[t] * G4;
        const StepWords sw{p.ids.as<int32_t>(), p.lengths.as<int32_t>(), T, t, d == 1};
        BackwardStep<<<Blocks(size_t(rows) * H), kThreads, 0, stream_>>>(
            sw, rows, H, da, p.tanh_c[d].as<float>() + p.gate_offset[t] * H,
            p.c_prev[d].as<float>() + p.state_offset[t] * H, dh.as<float>(), dc.as<float>(),
            dxw.as<float>());
        // dL/dh_prev = dL/da Wh^T (step 0's h_prev is the constant 0).
        if (t > 0) {
          SV_RETURN_IF_ERROR(
              Gemm(false, true, rows, H, G4, da, G4, P(L.wh[d]), G4, 0.0f, dh.as<float>(), H));
        }
      }
      SV_CUDA_RETURN(cudaGetLastError(), "a backward kernel");
      // Over every step at once: dWh += h_prev^T dL/da, db += the sum of dL/da's rows.
      const int R = static_cast<int>(p.gate_rows);
      SV_RETURN_IF_ERROR(Gemm(true, false, H, G4, R, p.h_prev[d].as<float>(), H,
                              p.gates[d].as<float>(), G4, 1.0f, g + L.wh[d], G4));
      SV_RETURN_IF_ERROR(AddColumnSums(p.gates[d].as<float>(), p.gate_rows, G4, g + L.b[d]));
      // The characters: dWx += E_used^T dxw; dE[used] += dxw Wx^T.
      SV_RETURN_IF_ERROR(Gemm(true, false, L.char_dim, G4, U, p.e_used.as<float>(), L.char_dim,
                              dxw.as<float>(), G4, 1.0f, g + L.wx[d], G4));
      SV_RETURN_IF_ERROR(Gemm(false, true, U, L.char_dim, G4, dxw.as<float>(), G4, P(L.wx[d]), G4,
                              0.0f, de.as<float>(), L.char_dim));
      ScatterAddRows<<<Blocks(size_t(U) * L.char_dim), kThreads, 0, stream_>>>(
          de.as<float>(), L.char_dim, p.used_rows.as<int32_t>(), U, g + L.emb);
      SV_CUDA_RETURN(cudaGetLastError(), "a backward kernel");
    }
  }
  SV_CUDA_RETURN(cudaMemcpyAsync(staging_, g, L.total * 4, cudaMemcpyDeviceToHost, stream_),
                 "copying the gradient");
  SV_CUDA_RETURN(cudaStreamSynchronize(stream_), "the backward pass");
  const float* host = reinterpret_cast<const float*>(staging_);
  for (size_t k = 0; k < L.total; ++k) gradient[k] += host[k];
  // The kept steps are spent: give their memory back to the pool now.
  p.FreeSteps();
  return Status::Ok();
}

StatusOr<std::shared_ptr<DeviceEncoder>> MakeDeviceEncoder(int ordinal, const CharLayout& layout) {
  auto encoder = std::make_shared<DeviceEncoder>(ordinal, layout);
  SV_RETURN_IF_ERROR(encoder->Init());
  return encoder;
}

Status DeviceForward(DeviceEncoder* encoder, const float* params, uint64_t version,
                     const DeviceWords& words, float* out, std::shared_ptr<DevicePass>* pass) {
  std::lock_guard<std::mutex> lock(encoder->mu);
  return encoder->Forward(params, version, words, out, pass);
}

Status DeviceBackward(DeviceEncoder* encoder, DevicePass* pass, const float* d_out,
                      float* gradient) {
  std::lock_guard<std::mutex> lock(encoder->mu);
  return encoder->Backward(pass, d_out, gradient);
}

}  // namespace streamvec::internal
