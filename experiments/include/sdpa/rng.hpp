// Deterministic randomness (docs/design.md, "Randomness"): counter-based Philox from Random123, one
// independent stream per (seed, experiment, cell, trial), normals through Boost.Random, whose
// algorithms are fixed across platforms (std::normal_distribution is not). A trial's numbers
// depend on its key alone, so any thread may draw them in any order.
#pragma once

#include <Random123/philox.h>

#include <boost/random/normal_distribution.hpp>
#include <cstdint>
#include <limits>
#include <span>

namespace sdpa {

struct StreamKey {
  std::uint64_t seed = 0;
  std::uint32_t experiment = 0;
  std::uint32_t cell = 0;
  std::uint32_t trial = 0;
  std::uint32_t purpose = 0;  // separates streams a trial needs for different things
};

// A UniformRandomBitGenerator over Philox4x32-10: the key holds the seed, the counter holds
// (block, trial, cell, experiment ^ purpose << 16); each block yields four 32-bit words.
class PhiloxStream {
 public:
  using result_type = std::uint32_t;
  explicit PhiloxStream(const StreamKey& k)
      : key_{{static_cast<std::uint32_t>(k.seed), static_cast<std::uint32_t>(k.seed >> 32)}},
        counter_{{0, k.trial, k.cell, k.experiment ^ (k.purpose << 16)}} {}

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }

  result_type operator()() {
    if (used_ == 4) {
      block_ = r123::Philox4x32{}(counter_, key_);
      counter_.v[0]++;
      used_ = 0;
    }
    return block_.v[used_++];
  }

 private:
  r123::Philox4x32::key_type key_;
  r123::Philox4x32::ctr_type counter_;
  r123::Philox4x32::ctr_type block_{};
  int used_ = 4;
};

// Fills x with independent N(mean, stddev^2) draws, rounded to T.
template <typename T>
void fill_normal(PhiloxStream& rng, std::span<T> x, double mean = 0, double stddev = 1) {
  boost::random::normal_distribution<double> normal(mean, stddev);
  for (T& v : x) v = static_cast<T>(normal(rng));
}

}  // namespace sdpa
