#include "kv_int8.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "decode_blocks.hpp"
#include "kv_formats.hpp"

namespace sdpa::detail {
namespace {

// Byte of depth c of key t of a block of nb keys (kv_int8.hpp's layout), from the block's start.
std::int64_t block_offset(std::int64_t t, std::int64_t c, std::int64_t nb) {
  return (c / 4 * nb + t) * 4 + c % 4;
}

}  // namespace

void int8_round_rows(const float* x, std::int64_t rows, std::int64_t d, float* y, int threads) {
#pragma omp parallel num_threads(threads)
  {
    std::vector<std::int8_t> ints(static_cast<std::size_t>(d));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const float scale = quantise_row(x + r * d, d, ints.data());
      for (std::int64_t c = 0; c < d; ++c) y[r * d + c] = scale * float(ints[std::size_t(c)]);
    }
  }
}

std::string int8_refusal(const Shape& s, const Mask&, const ScoreMod&) {
  if (!is_decode_shape(s) || int8_depth(s.d_k) <= kInt8MaxDepth) return "";
  return "d_k " + std::to_string(s.d_k) + " is above " + std::to_string(kInt8MaxDepth) +
         ", where the int8 scores' int32 sums could overflow";
}

std::unique_ptr<StoredKv> store_kv_int8(const ForwardArgs& a) {
  const Shape& s = a.shape;
  auto stored = std::make_unique<StoredKvInt8>();
  stored->shape = s;
  stored->d4 = int8_depth(s.d_k);
  const std::int64_t rows = s.kv_batch_heads() * s.n_kv, d4 = stored->d4;
  stored->k.assign(std::size_t(rows * d4), 0);
  stored->v.resize(std::size_t(s.v_elements()));
  stored->k_scale.resize(std::size_t(rows));
  stored->v_scale.resize(std::size_t(rows));
  StoredKvInt8& kv = *stored;
#pragma omp parallel for num_threads(a.threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t t = r % s.n_kv % kInt8KeyBlock, first = r - t;  // first key of the block
    const std::int64_t nb = std::min(kInt8KeyBlock, s.n_kv - first % s.n_kv);
    std::vector<std::int8_t> row(std::size_t(s.d_k));
    kv.k_scale[r] = quantise_row(a.k + r * s.d_k, s.d_k, row.data());
    std::int8_t* block = kv.k.data() + first * d4;
    for (std::int64_t c = 0; c < s.d_k; ++c) block[block_offset(t, c, nb)] = row[c];
    kv.v_scale[r] = quantise_row(a.v + r * s.d_v, s.d_v, kv.v.data() + r * s.d_v);
  }
  return stored;
}

const StoredKvInt8& stored_kv_int8(const ForwardArgs& a, std::unique_ptr<StoredKv>& own) {
  if (!a.stored_kv) {
    own = store_kv_int8(a);
    return static_cast<const StoredKvInt8&>(*own);
  }
  const auto* stored = dynamic_cast<const StoredKvInt8*>(a.stored_kv);
  if (!stored || !same_kv_shape(stored->shape, a.shape))
    throw std::invalid_argument("stored K/V of another format or shape than the call's");
  return *stored;
}

void dequantise_k_row(const StoredKvInt8& kv, std::int64_t r, float* out) {
  const Shape& s = kv.shape;
  const std::int64_t t = r % s.n_kv % kInt8KeyBlock, first = r - t;
  const std::int64_t nb = std::min(kInt8KeyBlock, s.n_kv - first % s.n_kv);
  const std::int8_t* block = kv.k.data() + first * kv.d4;
  for (std::int64_t c = 0; c < s.d_k; ++c)
    out[c] = kv.k_scale[r] * float(block[block_offset(t, c, nb)]);
}

void int8_scores_portable(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                          std::int64_t rows, const std::int8_t* k, const float* k_scale,
                          std::int64_t d4, std::int64_t nk, float* scores, std::int64_t ld_s) {
  for (std::int64_t j0 = 0; j0 < nk; j0 += kInt8KeyBlock) {
    const std::int64_t nb = std::min(kInt8KeyBlock, nk - j0);
    const std::int8_t* block = k + j0 * d4;
    for (std::int64_t i = 0; i < rows; ++i) {
      std::int32_t dot[kInt8KeyBlock] = {};
      const std::int8_t* qi = q + i * ld_q;
      for (std::int64_t c = 0; c < d4; c += 4)
        for (std::int64_t t = 0; t < nb; ++t)
          for (std::int64_t e = 0; e < 4; ++e)
            dot[t] += std::int32_t(qi[c + e]) * std::int32_t(block[block_offset(t, c + e, nb)]);
      for (std::int64_t t = 0; t < nb; ++t)
        scores[i * ld_s + j0 + t] = (q_scale[i] * k_scale[j0 + t]) * float(dot[t]);
    }
  }
}

#if !defined(SDPA_INT8_DOTS_X86) && !defined(SDPA_INT8_DOTS_ARM)
// A build with no native int8 products: the portable dots alone.
bool int8_dots_available(Int8Dots dots) { return dots == Int8Dots::portable; }
Int8ScoresFn int8_scores(Int8Dots) { return &int8_scores_portable; }
int int8_dot_lanes(Int8Dots) { return 0; }
// Unreachable while int8_dots_available() is false; loud if a caller forgets to ask.
float int8_dot_chains(Int8Dots, std::int64_t) { std::abort(); }
#endif

}  // namespace sdpa::detail
