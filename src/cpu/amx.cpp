// amx.cpp: whether this process may use Intel AMX's tile registers (cpu/amx.h).
#include "cpu/amx.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace oneflow::cpu {

bool amx_usable(AmxUnit unit) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static const unsigned edx = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, d = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &d) ? d : 0u;
  }();
  const bool tile = (edx >> 24) & 1;
  const bool has = unit == AmxUnit::kInt8 ? (edx >> 25) & 1 : (edx >> 22) & 1;
  if (!tile || !has) return false;
  static const bool permitted = [] {
    constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return permitted;
#else
  (void)unit;
  return false;
#endif
}

}  // namespace oneflow::cpu
