// The int8 scores of kv_int8.hpp in ymm registers, for the `Dot` of the including namespace (an
// instruction set's product of a key vector and a broadcast query quad, added into int32 lanes).
// int8_dots_x86.cpp includes this once per instruction set, each time inside that set's
// `#pragma GCC target` region: a target attribute cannot depend on a template argument.
// No include guard: each inclusion is a copy in its own namespace.

// Most query rows per pass over a half block: up to two accumulators a row, the keys and a
// broadcast fit 16 ymm registers.
constexpr int kMaxRows = 4;
constexpr std::int64_t kHalf = 8;  // keys of a half block: one int32 lane each
static_assert(kInt8KeyBlock == 2 * kHalf);

// Scores of R rows against the n <= 8 keys of one half of a block of nb keys; k is the half's
// first byte, so depth quad c / 4 of its keys starts at k + c nb. With Dot::kTwoChains two
// sums per row, over the even and the odd depth quads, for two dependency chains where a step's
// latency is long (integer sums: the same result in any order). `prefetch`: ask for the line
// kPrefetchBytes on per quad (whole blocks' first half).
template <int R>
void half_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                 const std::int32_t* q_bias, const std::int8_t* k, const float* k_scale,
                 std::int64_t d4, std::int64_t nb, std::int64_t n, bool prefetch, float* scores,
                 std::int64_t ld_s) {
  __m256i even[R], odd[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm256_setzero_si256();
  const bool whole = n == kHalf;
  const __m256i lanes =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // A key's quad is one int32 lane, so vpmaskmovd loads a part of a half without reading past it.
  const auto load = [&](std::int64_t c) {
    const std::int8_t* p = k + c * nb;
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
    return whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                 : _mm256_maskload_epi32(reinterpret_cast<const int*>(p), lanes);
  };
  const auto quad = [&](int r, std::int64_t c) {
    std::int32_t x;
    std::memcpy(&x, q + r * ld_q + c, sizeof x);
    return _mm256_set1_epi32(x);
  };
  if (prefetch)
    _mm_prefetch(reinterpret_cast<const char*>(k_scale + kPrefetchBytes / d4), _MM_HINT_T0);
  std::int64_t c = 0;
  for (; c + 8 <= d4; c += 8) {
    const auto k0 = Dot::keys(load(c)), k1 = Dot::keys(load(c + 4));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      even[r] = Dot::add(even[r], k0, quad(r, c));
      if constexpr (Dot::kTwoChains)
        odd[r] = Dot::add(odd[r], k1, quad(r, c + 4));
      else
        even[r] = Dot::add(even[r], k1, quad(r, c + 4));
    }
  }
  if (c < d4) {
    const auto k0 = Dot::keys(load(c));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) even[r] = Dot::add(even[r], k0, quad(r, c));
  }
  const __m256 ks = whole ? _mm256_loadu_ps(k_scale) : _mm256_maskload_ps(k_scale, lanes);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256i dot =
        _mm256_sub_epi32(_mm256_add_epi32(even[r], odd[r]), _mm256_set1_epi32(q_bias[r]));
    const __m256 s =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(q_scale[r]), ks), _mm256_cvtepi32_ps(dot));
    if (whole)
      _mm256_storeu_ps(scores + r * ld_s, s);
    else
      _mm256_maskstore_ps(scores + r * ld_s, lanes, s);
  }
}

// Int8ScoresFn by Dot: rows in passes of kMaxRows, each over every block in two halves.
void scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale, std::int64_t rows,
            const std::int8_t* k, const float* k_scale, std::int64_t d4, std::int64_t nk,
            float* out, std::int64_t ld_s) {
  using Half = void (*)(const std::int8_t*, std::int64_t, const float*, const std::int32_t*,
                        const std::int8_t*, const float*, std::int64_t, std::int64_t, std::int64_t,
                        bool, float*, std::int64_t);
  static constexpr Half kHalves[] = {half_scores<1>, half_scores<2>, half_scores<3>,
                                     half_scores<4>};
  static_assert(std::size(kHalves) == kMaxRows);
  for (std::int64_t i0 = 0; i0 < rows; i0 += kMaxRows) {
    const std::int64_t r = std::min<std::int64_t>(rows - i0, kMaxRows);
    std::int32_t bias[kMaxRows] = {};
    for (std::int64_t i = 0; i < r; ++i) {
      std::int32_t sum = 0;
      for (std::int64_t c = 0; c < d4; ++c) sum += q[(i0 + i) * ld_q + c];
      bias[i] = Dot::kOffset * sum;
    }
    for (std::int64_t j0 = 0; j0 < nk; j0 += kInt8KeyBlock) {
      const std::int64_t nb = std::min(kInt8KeyBlock, nk - j0);
      for (std::int64_t h = 0; h * kHalf < nb; ++h)
        kHalves[r - 1](q + i0 * ld_q, ld_q, q_scale + i0, bias, k + j0 * d4 + 4 * kHalf * h,
                       k_scale + j0 + kHalf * h, d4, nb, std::min(kHalf, nb - kHalf * h),
                       nb == kInt8KeyBlock && h == 0, out + i0 * ld_s + j0 + kHalf * h, ld_s);
    }
  }
}

// The peak: kChains chains, each step Dot::add of a constant key vector and the chain's own
// bytes as the query operand (the value only has to depend on the chain; int32 sums wrap,
// harmlessly). Written out, as peak.cpp's are: in an array GCC kept some chains on the stack.
float dot_chains(std::int64_t steps) {
  static_assert(peak::kChains == 12);
  const auto k = Dot::keys(_mm256_set1_epi8(1));
  __m256i c0 = _mm256_set1_epi32(0), c1 = _mm256_set1_epi32(1), c2 = _mm256_set1_epi32(2);
  __m256i c3 = _mm256_set1_epi32(3), c4 = _mm256_set1_epi32(4), c5 = _mm256_set1_epi32(5);
  __m256i c6 = _mm256_set1_epi32(6), c7 = _mm256_set1_epi32(7), c8 = _mm256_set1_epi32(8);
  __m256i c9 = _mm256_set1_epi32(9), c10 = _mm256_set1_epi32(10), c11 = _mm256_set1_epi32(11);
  for (std::int64_t s = 0; s < steps; ++s) {
    c0 = Dot::add(c0, k, c0), c1 = Dot::add(c1, k, c1), c2 = Dot::add(c2, k, c2);
    c3 = Dot::add(c3, k, c3), c4 = Dot::add(c4, k, c4), c5 = Dot::add(c5, k, c5);
    c6 = Dot::add(c6, k, c6), c7 = Dot::add(c7, k, c7), c8 = Dot::add(c8, k, c8);
    c9 = Dot::add(c9, k, c9), c10 = Dot::add(c10, k, c10), c11 = Dot::add(c11, k, c11);
  }
  for (const __m256i x : {c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11})
    c0 = _mm256_add_epi32(c0, x);
  std::int32_t lanes[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), c0);
  std::uint32_t total = 0;  // wraps like the lanes
  for (const std::int32_t x : lanes) total += std::uint32_t(x);
  return float(total);
}
