#include "query_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <span>

#include "probe_row.hpp"

namespace sdpa::detail {
namespace {

BlockScratch carve(Carver& c, const Shape& s, std::int64_t key_tile, std::int64_t ld_acc) {
  constexpr std::int64_t B = kQueryBlock;
  BlockScratch w{};
  w.q_t = c.floats(s.d_k * B);
  w.q_scale = c.floats(B);
  w.position = c.floats(B);
  w.scores = c.floats(key_tile * B);
  w.acc = c.floats(B * ld_acc);
  w.v_pack = ld_acc == s.d_v ? nullptr : c.floats(std::min(key_tile, kDepthChunk) * ld_acc);
  carve_row_stats(c, w);
  return w;
}

}  // namespace

void carve_row_stats(Carver& c, RowStats& w) {
  for (float** p : {&w.max, &w.sum, &w.rescale, &w.prev_max, &w.prev_sum, &w.tile_s, &w.tile_s2,
                    &w.tile_t, &w.tile_nonfinite, &w.tile_p2, &w.tile_p3})
    *p = c.floats(kQueryBlock);
  for (double** p : {&w.score_sum, &w.score_sumsq, &w.shifted_t, &w.nonfinite, &w.p2, &w.p3})
    *p = c.doubles(kQueryBlock);
}

std::int64_t scratch_floats(const Shape& s, std::int64_t key_tile, std::int64_t ld_acc) {
  Carver counter(nullptr);
  carve(counter, s, key_tile, ld_acc);
  return counter.used();
}

double tiled_workspace_bytes(const Shape& s, std::int64_t key_tile, std::int64_t lanes,
                             int threads) {
  const std::int64_t floats =
      scratch_floats(s, clamp_key_tile(s, key_tile), round_up(s.d_v, lanes));
  return double(threads) * sizeof(float) * double(floats);
}

BlockScratch carve_scratch(float* base, const Shape& s, std::int64_t key_tile,
                           std::int64_t ld_acc) {
  Carver c(base);
  return carve(c, s, key_tile, ld_acc);
}

void for_each_query_block(const ForwardArgs& a, std::int64_t key_tile, std::int64_t ld_acc,
                          BlockFn fn) {
  const Shape& s = a.shape;
  const std::int64_t blocks = s.batch_heads * query_blocks_per_head(s);
  const std::int64_t floats = scratch_floats(s, key_tile, ld_acc);
  // Dynamic scheduling: under causal masking late blocks see more keys. Each block is written
  // by one thread from inputs only, so the schedule cannot change a single bit of the output.
#pragma omp parallel num_threads(a.threads)
  {
    const AlignedFloats mem = aligned_floats(floats);
    const BlockScratch w = carve_scratch(mem.get(), s, key_tile, ld_acc);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < blocks; ++b) fn(a, query_block(s, b), key_tile, ld_acc, w);
  }
}

KeyRange begin_block(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w,
                     bool scale_q) {
  const Shape& s = a.shape;
  const ScoreMod& mod = a.score_mod;
  constexpr std::int64_t B = kQueryBlock;
  KeyRange visit{s.n_kv, 0};
  for (std::int64_t i = 0; i < B; ++i) {
    const std::int64_t row = blk.first_row + std::min(i, blk.rows - 1);
    w.q_scale[i] = mod.temperature.empty() ? a.scale : a.scale * mod.temperature[row];
    w.position[i] = float(row + (s.n_kv - s.n_q));
    if (i >= blk.rows) continue;
    const KeyRange r = a.mask.visible(s, row);
    if (r.size() == 0) continue;
    visit.begin = std::min(visit.begin, r.begin);
    visit.end = std::max(visit.end, r.end);
  }
  if (visit.end <= visit.begin) visit = {};
  visit.begin -= visit.begin % 2;
  const float* q = a.q + blk.row0(s) * s.d_k;
  for (std::int64_t c = 0; c < s.d_k; ++c)
    for (std::int64_t i = 0; i < B; ++i)
      w.q_t[c * B + i] = i < blk.rows ? (scale_q ? w.q_scale[i] : 1.0f) * q[i * s.d_k + c] : 0.0f;
  std::fill_n(w.max, B, -std::numeric_limits<float>::infinity());
  std::fill_n(w.sum, B, 0.0f);
  for (double* p : {w.score_sum, w.score_sumsq, w.shifted_t, w.nonfinite, w.p2, w.p3})
    std::fill_n(p, B, 0.0);
  return visit;
}

bool tile_needs_mask(const Shape& s, const Mask& mask, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t key_end) {
  if (mask.none()) return false;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const KeyRange r = mask.visible(s, blk.first_row + i);
    if (key0 < r.begin || key_end > r.end) return true;
  }
  return false;
}

void mask_tile(const Shape& s, const Mask& mask, const QueryBlock& blk, std::int64_t key0,
               std::int64_t nk, float* scores) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t key_end = key0 + nk;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const KeyRange r = mask.visible(s, blk.first_row + i);
    // An empty range masks the whole tile: its keys before r.begin and from r.end on.
    const std::int64_t seen_end = std::clamp(r.end, key0, key_end);
    const std::int64_t seen_begin = std::clamp(r.begin, key0, seen_end);
    for (std::int64_t j = key0; j < seen_begin; ++j) scores[(j - key0) * kQueryBlock + i] = kNegInf;
    for (std::int64_t j = seen_end; j < key_end; ++j)
      scores[(j - key0) * kQueryBlock + i] = kNegInf;
  }
}

void fold_tile_probes(const RowStats& w, std::int64_t rows) {
  for (std::int64_t i = 0; i < rows; ++i) {
    w.score_sum[i] += w.tile_s[i];
    w.score_sumsq[i] += w.tile_s2[i];
    w.nonfinite[i] += w.tile_nonfinite[i];
    const double m_new = std::isfinite(w.max[i]) ? w.max[i] : 0.0;  // the shift the tile used
    const double moved =
        w.prev_sum[i] > 0
            ? w.rescale[i] * (w.shifted_t[i] + (w.prev_max[i] - m_new) * w.prev_sum[i])
            : 0.0;
    w.shifted_t[i] = moved + w.tile_t[i];
    const double alpha = w.prev_sum[i] > 0 ? w.rescale[i] : 0.0;
    w.p2[i] = alpha * alpha * w.p2[i] + w.tile_p2[i];
    w.p3[i] = alpha * alpha * alpha * w.p3[i] + w.tile_p3[i];
  }
}

void finish_row(const ForwardArgs& a, std::int64_t r, const RowResult& row) {
  const Shape& s = a.shape;
  const float l = row.sum;
  float* o = a.out + r * s.d_v;
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  for (std::int64_t c = 0; c < s.d_v; ++c) o[c] = l > 0 ? row.acc[c] * inv : 0.0f;
  if (a.lse) a.lse[r] = l > 0 ? row.max + std::log(l) : -std::numeric_limits<float>::infinity();
  if (a.probes) {
    RowProbes& p = *a.probes;
    p.score_sum[r] = row.score_sum;
    p.score_sumsq[r] = row.score_sumsq;
    p.entropy[r] = l > 0 ? std::log(double(l)) - row.shifted_t / l : 0.0;
    p.max_weight[r] = l > 0 ? 1.0 / l : 0.0;
    p.sum_p2[r] = l > 0 ? row.p2 / (double(l) * l) : 0.0;
    p.sum_p3[r] = l > 0 ? row.p3 / (double(l) * l * l) : 0.0;
    p.nonfinite[r] = row.nonfinite + count_nonfinite(o, s.d_v);
  }
}

namespace {

// The row's sums with its sink as one more key of score `sink`, weight 1 and no value (as the
// decode path's merge adds it), all moved to the max M = max(m, sink): l' = alpha l + e^{sink-M},
// acc' = alpha acc (zero for a row that saw no key), t' and the sums of p^2, p^3 as
// fold_tile_probes moves them.
void add_sink(RowResult& row, float sink, float* acc, std::int64_t d_v) {
  if (!(sink > -std::numeric_limits<float>::infinity())) return;
  if (!(row.sum > 0)) {
    std::fill_n(acc, d_v, 0.0f);
    row = {.max = sink,
           .sum = 1.0f,
           .acc = acc,
           .score_sum = row.score_sum,
           .score_sumsq = row.score_sumsq,
           .p2 = 1.0,
           .p3 = 1.0,
           .nonfinite = row.nonfinite};
    return;
  }
  const float m = std::max(row.max, sink);
  const float alpha = std::exp(row.max - m), own = std::exp(sink - m);
  const double ad = alpha, od = own;
  row.shifted_t = ad * (row.shifted_t + (double(row.max) - m) * row.sum) + od * (double(sink) - m);
  row.p2 = ad * ad * row.p2 + od * od;
  row.p3 = ad * ad * ad * row.p3 + od * od * od;
  if (alpha != 1.0f)
    for (std::int64_t c = 0; c < d_v; ++c) acc[c] *= alpha;
  row.sum = alpha * row.sum + own;
  row.max = m;
}

}  // namespace

void finish_block(const ForwardArgs& a, const QueryBlock& blk, KeyRange visited,
                  std::int64_t ld_acc, const BlockScratch& w) {
  const std::span<const float> sinks = a.score_mod.sinks;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    // Masked keys of the visited range were set to -inf and counted as non-finite.
    const KeyRange r = a.mask.visible(a.shape, blk.first_row + i);
    const KeyRange seen{std::max(r.begin, visited.begin), std::min(r.end, visited.end)};
    const std::int64_t masked = visited.size() - seen.size();
    RowResult row{.max = w.max[i],
                  .sum = w.sum[i],
                  .acc = w.acc + i * ld_acc,
                  .score_sum = w.score_sum[i],
                  .score_sumsq = w.score_sumsq[i],
                  .shifted_t = w.shifted_t[i],
                  .p2 = w.p2[i],
                  .p3 = w.p3[i],
                  .nonfinite = std::int64_t(w.nonfinite[i]) - masked};
    if (!sinks.empty())
      add_sink(row, sinks[std::size_t(blk.head) % sinks.size()], w.acc + i * ld_acc, a.shape.d_v);
    finish_row(a, blk.row0(a.shape) + i, row);
  }
}

}  // namespace sdpa::detail
