// The int8 scores of kv_int8.hpp in vectors of int32 lanes (zmm: 16 keys a vector, ymm: 8, xmm:
// 4), for the `Dot` of the including namespace: an instruction set's product of a key vector and
// a broadcast query quad, added into int32 lanes, over the vector operations of its width (Zmm,
// Ymm or Xmm in int8_dots_x86.cpp). int8_dots_x86.cpp includes this once per instruction set, each
// time inside that set's `#pragma GCC target` region: a target attribute cannot depend on a
// template argument. No include guard: each inclusion is a copy in its own namespace.

// Most query rows per pass over a part of a block: up to two accumulators a row, the keys and a
// broadcast fit 16 vector registers.
constexpr int kMaxRows = 4;
constexpr std::int64_t kPart = Dot::kKeys;  // keys of a part of a block: one int32 lane each
static_assert(kInt8KeyBlock % kPart == 0);

// Scores of R rows against the n <= kPart keys of one part of a block of nb keys; k is the
// part's first byte, so depth quad c / 4 of its keys starts at k + c nb. With Dot::kTwoChains
// two sums per row, over the even and the odd depth quads, for two dependency chains where a
// step's latency is long (integer sums: the same result in any order). `prefetch`: ask for the
// line kPrefetchBytes on per quad into L2 (whole blocks' first part).
template <int R>
void part_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                 const std::int32_t* q_bias, const std::int8_t* k, const float* k_scale,
                 std::int64_t d4, std::int64_t nb, std::int64_t n, bool prefetch, float* scores,
                 std::int64_t ld_s) {
  typename Dot::I even[R], odd[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) even[r] = odd[r] = Dot::zero();
  const bool whole = n == kPart;
  const auto part = Dot::part(n);
  const auto load = [&](std::int64_t c) {
    const std::int8_t* p = k + c * nb;
    if (prefetch) prefetch_to_l2(p + kPrefetchBytes);
    return whole ? Dot::load(p) : Dot::load(p, part);
  };
  const auto quad = [&](int r, std::int64_t c) {
    std::int32_t x;
    std::memcpy(&x, q + r * ld_q + c, sizeof x);
    return Dot::broadcast(x);
  };
  if (prefetch) prefetch_to_l2(k_scale + kPrefetchBytes / d4);
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
  const auto ks = whole ? Dot::load(k_scale) : Dot::load(k_scale, part);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const auto s =
        Dot::scores(Dot::sub(Dot::sum(even[r], odd[r]), Dot::broadcast(q_bias[r])), q_scale[r], ks);
    if (whole)
      Dot::store(scores + r * ld_s, s);
    else
      Dot::store(scores + r * ld_s, s, part);
  }
}

// Int8ScoresFn by Dot: rows in passes of kMaxRows, each over every block in parts.
void scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale, std::int64_t rows,
            const std::int8_t* k, const float* k_scale, std::int64_t d4, std::int64_t nk,
            float* out, std::int64_t ld_s) {
  using Part = void (*)(const std::int8_t*, std::int64_t, const float*, const std::int32_t*,
                        const std::int8_t*, const float*, std::int64_t, std::int64_t, std::int64_t,
                        bool, float*, std::int64_t);
  static constexpr Part kParts[] = {part_scores<1>, part_scores<2>, part_scores<3>, part_scores<4>};
  static_assert(std::size(kParts) == kMaxRows);
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
      for (std::int64_t h = 0; h * kPart < nb; ++h)
        kParts[r - 1](q + i0 * ld_q, ld_q, q_scale + i0, bias, k + j0 * d4 + 4 * kPart * h,
                      k_scale + j0 + kPart * h, d4, nb, std::min(kPart, nb - kPart * h),
                      nb == kInt8KeyBlock && h == 0, out + i0 * ld_s + j0 + kPart * h, ld_s);
    }
  }
}

// The peak: kChains chains, each step Dot::add of a constant key vector and the chain's own
// bytes as the query operand (the value only has to depend on the chain; int32 sums wrap,
// harmlessly). Written out, as peak.cpp's are: in an array GCC kept some chains on the stack.
float dot_chains(std::int64_t steps) {
  static_assert(peak::kChains == 12);
  const auto k = Dot::keys(Dot::bytes(1));
  auto c0 = Dot::broadcast(0), c1 = Dot::broadcast(1), c2 = Dot::broadcast(2);
  auto c3 = Dot::broadcast(3), c4 = Dot::broadcast(4), c5 = Dot::broadcast(5);
  auto c6 = Dot::broadcast(6), c7 = Dot::broadcast(7), c8 = Dot::broadcast(8);
  auto c9 = Dot::broadcast(9), c10 = Dot::broadcast(10), c11 = Dot::broadcast(11);
  for (std::int64_t s = 0; s < steps; ++s) {
    c0 = Dot::add(c0, k, c0), c1 = Dot::add(c1, k, c1), c2 = Dot::add(c2, k, c2);
    c3 = Dot::add(c3, k, c3), c4 = Dot::add(c4, k, c4), c5 = Dot::add(c5, k, c5);
    c6 = Dot::add(c6, k, c6), c7 = Dot::add(c7, k, c7), c8 = Dot::add(c8, k, c8);
    c9 = Dot::add(c9, k, c9), c10 = Dot::add(c10, k, c10), c11 = Dot::add(c11, k, c11);
  }
  for (const auto x : {c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11}) c0 = Dot::sum(c0, x);
  std::int32_t lanes[kPart];
  Dot::store(lanes, c0);
  std::uint32_t total = 0;  // wraps like the lanes
  for (const std::int32_t x : lanes) total += std::uint32_t(x);
  return float(total);
}
