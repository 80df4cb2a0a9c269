#pragma once
// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i), so the
// same synthetic weights come out on the host and on the device, in any order, in parallel.
#include <cstdint>

#include "core/hd.h"

namespace fuselm {

FUSELM_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), 24 random bits.
FUSELM_HD float counter_uniform(uint64_t seed, uint64_t i) {
  uint64_t h = splitmix64(seed ^ splitmix64(i));
  return static_cast<float>(static_cast<int32_t>(h >> 40) - (1 << 23)) * (1.0f / (1 << 23));
}

// A small sequential generator for sampling: one per request, seeded by the user.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform in [0, 1).
  float next_float() { return static_cast<float>(next_u64() >> 40) * (1.0f / (1 << 24)); }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace fuselm
