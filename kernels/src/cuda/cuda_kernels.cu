// CUDA twins of the shared SGNS math. Compiled only in a CUDA build.
#include <cuda_runtime.h>

#include <string>

#include "streamvec/kernels/cuda.h"
#include "streamvec/kernels/sgns_math.h"

namespace streamvec {
namespace {

__global__ void LogitGradientKernel(const float* table, const float* logits, const float* labels,
                                    float lr, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = SgnsLogitGradient(table, logits[i], labels[i], lr);
}

Status CudaError(const char* what, cudaError_t e) {
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

bool CudaBuilt() { return true; }

Status CudaCheckDevice(int ordinal, CudaDeviceInfo* info) {
  int driver = 0, runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t de = cudaDriverGetVersion(&driver);
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  if (de != cudaSuccess || driver == 0) {
    cudaGetLastError();
    return Status::FailedPrecondition("no CUDA driver found (libcuda.so from the NVIDIA driver "
                                      "is not installed or not loadable)");
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver || driver < runtime) {
      return Status::FailedPrecondition("the CUDA driver is too old: it supports CUDA " +
                                        version(driver) + ", this build needs CUDA " +
                                        version(runtime) + " (update the NVIDIA driver)");
    }
    if (e == cudaErrorNoDevice) return Status::FailedPrecondition("no CUDA device found");
    return Status::FailedPrecondition(std::string("no usable CUDA device: ") +
                                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  if (count == 0) return Status::FailedPrecondition("no CUDA device found");
  if (ordinal < 0 || ordinal >= count) {
    return Status::FailedPrecondition("no CUDA device " + std::to_string(ordinal) + ": this " +
                                      "machine has " + std::to_string(count) + " (cuda:0" +
                                      (count > 1 ? " to cuda:" + std::to_string(count - 1) : "") +
                                      ")");
  }
  cudaDeviceProp prop{};
  cudaError_t pe = cudaGetDeviceProperties(&prop, ordinal);
  size_t free_bytes = 0, total_bytes = 0;
  if (pe == cudaSuccess) pe = cudaSetDevice(ordinal);
  if (pe == cudaSuccess) pe = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (pe != cudaSuccess) {
    cudaGetLastError();
    return Status::FailedPrecondition("CUDA device " + std::to_string(ordinal) +
                                      " is not usable: " +
                                      cudaGetErrorName(pe) + " (" + cudaGetErrorString(pe) + ")");
  }
  if (prop.major < 7) {
    return Status::FailedPrecondition(std::string("CUDA device ") + std::to_string(ordinal) + " (" +
                                      prop.name + ") has compute capability " +
                                      std::to_string(prop.major) + "." +
                                      std::to_string(prop.minor) +
                                      "; streamvec needs 7.0 or newer");
  }
  if (info != nullptr) {
    info->name = prop.name;
    info->ordinal = ordinal;
    info->compute_major = prop.major;
    info->compute_minor = prop.minor;
    info->multiprocessors = prop.multiProcessorCount;
    info->total_bytes = total_bytes;
    info->free_bytes = free_bytes;
    info->driver_version = driver;
    info->runtime_version = runtime;
  }
  return Status::Ok();
}

int CudaDeviceCount() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count;
}

Status CudaSgnsLogitGradients(const float* logits, const float* labels, float lr, int n,
                              float* out) {
  if (CudaDeviceCount() == 0) return Status::FailedPrecondition("no CUDA device");
  if (n <= 0) return Status::Ok();
  float host_table[kSigmoidTableSize];
  FillSigmoidTable(host_table);
  float *table = nullptr, *d_logits = nullptr, *d_labels = nullptr, *d_out = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  cudaError_t e = cudaMalloc(&table, sizeof host_table);
  if (e == cudaSuccess) e = cudaMalloc(&d_logits, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&d_labels, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&d_out, bytes);
  if (e == cudaSuccess) {
    e = cudaMemcpy(table, host_table, sizeof host_table, cudaMemcpyHostToDevice);
  }
  if (e == cudaSuccess) e = cudaMemcpy(d_logits, logits, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(d_labels, labels, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    LogitGradientKernel<<<(n + 255) / 256, 256>>>(table, d_logits, d_labels, lr, n, d_out);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost);
  cudaFree(table);
  cudaFree(d_logits);
  cudaFree(d_labels);
  cudaFree(d_out);
  return e == cudaSuccess ? Status::Ok() : CudaError("CudaSgnsLogitGradients", e);
}

}  // namespace streamvec
