#include "half_softmax.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace sdpa {

std::int64_t fp16_overflowing_rows(const float* q, const float* k, std::int64_t n_q,
                                   std::int64_t n_kv, std::int64_t d_k, float scale, float softcap,
                                   float sink) {
  // Rows in blocks, Q transposed, so that the dot products of a block's rows are independent
  // sums the compiler vectorises across rows; each is still summed over c in order.
  constexpr std::int64_t kBlock = 16;
  std::vector<float> q_t(std::size_t(d_k * kBlock)), dot(kBlock), sum(kBlock);
  const auto cap = [&](float s) { return softcap > 0 ? softcap * std::tanh(s / softcap) : s; };
  std::int64_t rows = 0;
  for (std::int64_t i0 = 0; i0 < n_q; i0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, n_q - i0);
    for (std::int64_t i = 0; i < nb; ++i)
      for (std::int64_t c = 0; c < d_k; ++c) q_t[c * kBlock + i] = q[(i0 + i) * d_k + c];
    // The sink's exp(sink), held in fp16, starts each row's sum (0 without one).
    std::fill(sum.begin(), sum.end(), fp16_round(std::exp(fp16_round(sink))));
    for (std::int64_t j = 0; j < n_kv; ++j) {
      const float* kj = k + j * d_k;
      std::fill(dot.begin(), dot.end(), 0.0f);
      for (std::int64_t c = 0; c < d_k; ++c)
        for (std::int64_t i = 0; i < kBlock; ++i) dot[i] += q_t[c * kBlock + i] * kj[c];
      for (std::int64_t i = 0; i < nb; ++i)
        sum[i] += fp16_round(std::exp(fp16_round(cap(scale * dot[i]))));
    }
    for (std::int64_t i = 0; i < nb; ++i) rows += std::isfinite(fp16_round(sum[i])) ? 0 : 1;
  }
  return rows;
}

}  // namespace sdpa
