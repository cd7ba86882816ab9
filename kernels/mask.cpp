#include "sdpa/mask.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sdpa/kernels.hpp"

namespace sdpa {

KeyRange Mask::visible(const Shape& s, std::int64_t i) const {
  const std::int64_t p = i + (s.n_kv - s.n_q);
  KeyRange r{0, s.n_kv};
  if (causal) r.end = std::min(r.end, std::max(p + 1, prefix));
  if (window_left >= 0) r.begin = std::max(r.begin, p - window_left);
  if (window_right >= 0) r.end = std::min(r.end, p + window_right + 1);
  // A row before the keys (p < 0, n_q > n_kv) is in no chunk and no document of keys.
  if (chunk > 0) {
    const std::int64_t first = p >= 0 ? p / chunk * chunk : -((chunk - 1 - p) / chunk) * chunk;
    r.begin = std::max(r.begin, first);
    r.end = std::min(r.end, first + chunk);
  }
  if (!documents.empty()) {
    if (p < 0) return {0, 0};
    const auto next = std::upper_bound(documents.begin(), documents.end(), p);
    r.begin = std::max(r.begin, *(next - 1));
    if (next != documents.end()) r.end = std::min(r.end, *next);
  }
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

std::string mask_problem(const Shape& s, const Mask& m, const ScoreMod& mod) {
  if (m.prefix < 0) return "the prefix is below 0";
  if (m.window_left < -1 || m.window_right < -1)
    return "a window extent is below 0 (-1 means unbounded)";
  if (m.chunk < 0) return "the chunk length is below 0";
  if (!m.documents.empty()) {
    if (m.documents.front() != 0) return "the first document does not start at position 0";
    for (std::size_t d = 1; d < m.documents.size(); ++d)
      if (m.documents[d] <= m.documents[d - 1])
        return "document starts do not ascend (document " + std::to_string(d) + ")";
    if (m.documents.back() >= s.n_kv)
      return "a document starts at " + std::to_string(m.documents.back()) +
             ", past the sequence of " + std::to_string(s.n_kv) + " keys";
  }
  if (mod.softcap != 0 && !(std::isfinite(mod.softcap) && mod.softcap > 0))
    return "the soft-cap must be a positive finite number (0 for none)";
  const auto per_head = [&](std::span<const float> x, const char* what) -> std::string {
    if (x.empty()) return "";
    if (s.batch_heads % std::int64_t(x.size()) != 0)
      return std::string(what) + " has " + std::to_string(x.size()) +
             " entries, which do not divide the " + std::to_string(s.batch_heads) +
             " batch heads (one per query head)";
    return "";
  };
  if (auto why = per_head(mod.alibi_slopes, "the ALiBi slope list"); !why.empty()) return why;
  if (auto why = per_head(mod.sinks, "the sink list"); !why.empty()) return why;
  for (const float x : mod.alibi_slopes)
    if (!std::isfinite(x)) return "an ALiBi slope is not finite";
  for (const float x : mod.sinks)
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      return "a sink is NaN or +inf (-inf is a sink that takes nothing)";
  if (!mod.temperature.empty()) {
    if (std::int64_t(mod.temperature.size()) != s.n_q)
      return "the temperature has " + std::to_string(mod.temperature.size()) +
             " entries, not one per query row (" + std::to_string(s.n_q) + ")";
    for (const float x : mod.temperature)
      if (!(std::isfinite(x) && x > 0)) return "a temperature is not a positive finite number";
  }
  return "";
}

std::vector<float> alibi_slopes(std::int64_t heads) {
  std::vector<float> slopes(std::size_t(std::max<std::int64_t>(heads, 0)));
  for (std::size_t h = 0; h < slopes.size(); ++h)
    slopes[h] = float(std::exp2(-8.0 * double(h + 1) / double(heads)));
  return slopes;
}

std::vector<float> llama4_temperature(const Shape& s) {
  constexpr double kFloorScale = 8192, kAttnScale = 0.1;
  std::vector<float> t(std::size_t(std::max<std::int64_t>(s.n_q, 0)));
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double p = double(std::int64_t(i) + s.n_kv - s.n_q);
    t[i] = float(1 + kAttnScale * std::log(std::floor((p + 1) / kFloorScale) + 1));
  }
  return t;
}

double visible_pairs(const Shape& s, const Mask& m) {
  if (m.none()) return double(s.n_q) * double(s.n_kv);
  double pairs = 0;
  for (std::int64_t i = 0; i < s.n_q; ++i) pairs += double(m.visible(s, i).size());
  return pairs;
}

std::int64_t visible_keys_union(const Shape& s, const Mask& m) {
  if (m.none()) return s.n_kv;
  // Every mask's range starts no earlier for a later row, so ranges merge in row order.
  std::int64_t keys = 0, covered = 0;
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const KeyRange r = m.visible(s, i);
    const std::int64_t from = std::max(r.begin, covered);
    if (r.end > from) keys += r.end - from;
    covered = std::max(covered, r.end);
  }
  return keys;
}

RowLogits row_logits(const Shape& s, const ScoreMod& mod, float scale, std::int64_t b,
                     std::int64_t i) {
  RowLogits r{.scale = mod.temperature.empty() ? scale : scale * mod.temperature[i],
              .softcap = mod.softcap,
              .position = i + (s.n_kv - s.n_q)};
  if (!mod.alibi_slopes.empty()) r.slope = mod.alibi_slopes[b % mod.alibi_slopes.size()];
  if (!mod.sinks.empty()) r.sink = mod.sinks[b % mod.sinks.size()];
  return r;
}

}  // namespace sdpa
