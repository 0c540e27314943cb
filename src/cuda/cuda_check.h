// cuda_check.h (internal): CUDA runtime / cuBLAS status checks that throw of::Error with
// file:line, and the device helpers shared by the CUDA backend's host code (.cpp files).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "oneflow/error.h"

namespace oneflow::cuda_module {

// Clears the runtime's last-error slot and throws "[cuda] <expr> failed: <name>: <text> (f:l)".
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file,
                                     int line);

// Validates a CUDA device index (-1: the current device) and returns the concrete index.
// Throws a clear [cuda] error when no device is present or the index is out of range.
int resolve_device(int index);

// Makes `device` current for the guard's lifetime (restores the previous one on exit).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;  // -1: the device was already current, nothing to restore
};

}  // namespace oneflow::cuda_module

#define OF_CUDA_CHECK(expr)                                                              \
  do {                                                                                   \
    cudaError_t of_cuda_err_ = (expr);                                                   \
    if (of_cuda_err_ != cudaSuccess)                                                     \
      ::oneflow::cuda_module::throw_cuda_error(of_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define OF_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                      \
    cublasStatus_t of_cublas_st_ = (expr);                                                  \
    if (of_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::oneflow::cuda_module::throw_cublas_error(of_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)
