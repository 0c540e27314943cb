// amx.h (internal): whether this process may use Intel AMX's tile registers (the int8 and
// bfloat16 GEMMs: cpu/gemm_s8.cpp, cpu/gemm_bf16.cpp).
#pragma once

namespace oneflow::cpu {

// AMX-TILE plus the given one of AMX-INT8 / AMX-BF16 in CPUID, and Linux's permission for the
// tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA: asked once per process; without
// it the first tile instruction faults). False off x86-64 Linux.
enum class AmxUnit { kInt8, kBf16 };
bool amx_usable(AmxUnit unit);

}  // namespace oneflow::cpu
