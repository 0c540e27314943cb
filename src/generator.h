// generator.h (internal): the seeded counter-based generator (Philox-4x32-10).
// NOTE [Random numbers]: element i of a random op draws from counter (offset + i / 4), so
// the values depend only on (seed, offset, i) -- never on the thread count or the chunking.
#pragma once
#include <cmath>
#include <cstdint>

#include "oneflow/dtype.h"

namespace oneflow {

struct Philox {
  OF_HD static void round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                          uint32_t k1) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  // Four 32-bit random words for counter `ctr` under key `seed`.
  OF_HD static void generate(uint64_t seed, uint64_t ctr, uint32_t out[4]) {
    uint32_t c0 = uint32_t(ctr), c1 = uint32_t(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      round(c0, c1, c2, c3, k0, k1);
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
  // Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
  OF_HD static float u01f(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }
  OF_HD static double u01d(uint32_t a, uint32_t b) {
    return double((uint64_t(a) << 21) ^ (b >> 11)) * (1.0 / 9007199254740992.0);
  }
};

// The words of elements [first, first + n) of the stream (seed, offset): element i is word
// i % 4 of counter offset + i / 4 (NOTE [Random numbers]). Bitwise Philox::generate, sixteen
// counters at a time in vector registers (NOTE [Batched Philox]).
void philox_words(uint64_t seed, uint64_t offset, uint64_t first, int64_t n, uint32_t* out);

struct GeneratorState {
  uint64_t seed;
  uint64_t offset;  // in units of 4-word counters
};

// Reserves `counters` Philox counters from the default generator and returns (seed, start).
GeneratorState reserve_random(uint64_t counters);
// The default generator's state, and setting it (the tracer replays manual_seed with these).
GeneratorState random_state();
void set_random_state(GeneratorState s);

}  // namespace oneflow
