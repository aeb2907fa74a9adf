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
  if (e == cudaSuccess) e = cudaMemcpy(table, host_table, sizeof host_table, cudaMemcpyHostToDevice);
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
