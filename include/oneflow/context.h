// context.h: process-wide numeric switches, libtorch's at::globalContext() names.
#pragma once

namespace oneflow {

class Context {
 public:
  // TF32 tensor-core math for float32 matmuls on CUDA (cuBLAS) and convolutions (cuDNN). Off
  // by default, as in libtorch, so float32 results match the CPU to float32 rounding.
  bool allowTF32CuBLAS() const;
  void setAllowTF32CuBLAS(bool allow);
  bool allowTF32CuDNN() const;
  void setAllowTF32CuDNN(bool allow);
};

Context& globalContext();

}  // namespace oneflow
