#include "decode_blocks.hpp"

#include <algorithm>

#include "cached_scratch.hpp"

namespace sdpa::detail {
namespace {

std::int64_t ceil_div(std::int64_t x, std::int64_t y) { return (x + y - 1) / y; }

constexpr std::int64_t kProbeSums = 6;  // RowStats' double sums

DecodeScratch carve(Carver& c, const Shape& s, const DecodeGeometry& g) {
  DecodeScratch w{};
  w.ld_q = round_up(s.d_k, kPartialAlign);
  w.tile = g.tile;
  w.q = c.floats(kDecodeRows * w.ld_q);
  w.scores = c.floats(g.max_rows * g.tile);
  w.k_pack = c.floats(kPartialAlign * w.ld_q);
  w.v_pack = c.floats(kDepthChunk * g.ld_acc);
  w.dots = c.floats(kMaxScoreRows * kPartialAlign * kPartialAlign);
  w.q_t = c.floats(w.ld_q * kDecodeRows);
  w.scores_t = c.floats(takes_query_lanes(g.max_rows) ? g.tile * kDecodeRows : 0);
  w.acc_t = c.floats(takes_query_lanes(g.max_rows) ? g.ld_acc * kDecodeRows : 0);
  w.merged = c.floats(g.ld_acc);
  carve_row_stats(c, w);
  return w;
}

}  // namespace

bool is_decode_shape(const Shape& s) { return s.n_q <= kDecodeRows; }

DecodeGeometry::DecodeGeometry(const Shape& s, const Mask& mask) {
  // As few blocks per group as kDecodeRows allows, with the heads spread evenly over them.
  const std::int64_t heads_fit = std::max<std::int64_t>(1, kDecodeRows / s.n_q);
  heads_per_block = ceil_div(s.group, ceil_div(s.group, heads_fit));
  blocks_per_kv = ceil_div(s.group, heads_per_block);
  blocks = s.kv_batch_heads() * blocks_per_kv;
  max_rows = heads_per_block * s.n_q;
  // Every block walks the keys some row sees, in splits of whole units from the first of them.
  // Rows see ranges that start no earlier for a later row, and consecutive rows' ranges touch
  // or overlap, so the union is one range.
  key_begin = 0;
  key_end = s.n_kv;
  if (!mask.none()) {
    key_begin = s.n_kv;
    key_end = 0;
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      const KeyRange r = mask.visible(s, i);
      if (r.size() == 0) continue;
      key_begin = std::min(key_begin, r.begin);
      key_end = std::max(key_end, r.end);
    }
    if (key_end <= key_begin) key_begin = key_end = 0;
    key_begin = key_begin / kDecodeKeyAlign * kDecodeKeyAlign;
    key_end = std::min(s.n_kv, round_up(key_end, kDecodeKeyAlign));
  }
  const std::int64_t units = ceil_div(key_end - key_begin, kDecodeUnit);
  const std::int64_t wanted =
      std::clamp<std::int64_t>(ceil_div(kSplitItems, blocks), 1, kMaxSplits);
  keys_per_split =
      units == 0 ? kDecodeUnit : ceil_div(units, std::min(units, wanted)) * kDecodeUnit;
  splits = ceil_div(key_end - key_begin, keys_per_split);
  tile = std::min({keys_per_split, kMaxTile,
                   std::max(kDecodeUnit, kDecodeScores / max_rows / kDecodeUnit * kDecodeUnit)});
  ld_acc = round_up(s.d_v, kPartialAlign);
}

DecodeBlock DecodeGeometry::block(std::int64_t index, const Shape& s) const {
  const std::int64_t kv = index / blocks_per_kv;
  const std::int64_t first_head = (index % blocks_per_kv) * heads_per_block;
  const std::int64_t heads = std::min(heads_per_block, s.group - first_head);
  return {.index = index,
          .kv = kv,
          .first_row = (kv * s.group + first_head) * s.n_q,
          .rows = heads * s.n_q};
}

std::int64_t DecodePartials::split_floats(const DecodeGeometry& g, bool probes) {
  // ld_acc is a multiple of kPartialAlign, so the doubles start 8-byte aligned.
  return round_up(g.max_rows * (2 + g.ld_acc) + (probes ? 2 * kProbeSums * g.max_rows : 0),
                  kAlignFloats);
}

std::int64_t DecodePartials::floats(const DecodeGeometry& g, bool probes) {
  return g.items() * split_floats(g, probes);
}

DecodePartials::DecodePartials(const DecodeGeometry& g, bool probes, float* base)
    : rows_(g.max_rows),
      ld_acc_(g.ld_acc),
      splits_(g.splits),
      stride_(split_floats(g, probes)),
      probes_(probes),
      base_(base) {}

DecodePartials::Split DecodePartials::split(std::int64_t block, std::int64_t split) const {
  float* p = base_ + (block * splits_ + split) * stride_;
  return {.max = p,
          .sum = p + rows_,
          .acc = p + 2 * rows_,
          .probe_sums = probes_ ? reinterpret_cast<double*>(p + rows_ * (2 + ld_acc_)) : nullptr};
}

std::int64_t decode_scratch_floats(const Shape& s, const DecodeGeometry& g) {
  Carver counter(nullptr);
  carve(counter, s, g);
  return counter.used();
}

DecodeScratch carve_decode_scratch(float* base, const Shape& s, const DecodeGeometry& g) {
  Carver c(base);
  return carve(c, s, g);
}

void for_each_decode_split(const ForwardArgs& a, const DecodeKv& kv, DecodeSplitFn split_fn,
                           DecodeMergeFn merge_fn) {
  const Shape& s = a.shape;
  const DecodeGeometry g(s, a.mask);
  const bool probes = a.probes != nullptr;
  thread_local CachedScratch t_partials;
  const DecodePartials partials(g, probes, t_partials.floats(DecodePartials::floats(g, probes)));
  const std::int64_t scratch = decode_scratch_floats(s, g);
#pragma omp parallel num_threads(a.threads)
  {
    const AlignedFloats mem = aligned_floats(scratch);
    const DecodeScratch w = carve_decode_scratch(mem.get(), s, g);
    // Dynamic scheduling: splits are equal but for the last of a block. Each partial is written
    // by one thread from inputs only, so the schedule cannot change a bit of it.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < g.items(); ++item)
      split_fn(a, kv, g, g.block(item / g.splits, s), item % g.splits, partials, w);
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < g.blocks; ++b) merge_fn(a, g, g.block(b, s), partials, w);
  }
}

double decode_workspace_bytes(const Shape& s, int threads) {
  const DecodeGeometry g(s, Mask::full());
  return sizeof(float) * double(DecodePartials::floats(g, true) +
                                std::int64_t(threads) * decode_scratch_floats(s, g));
}

}  // namespace sdpa::detail
