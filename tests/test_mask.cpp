// The mask and score-modifier description (sdpa/mask.hpp): each row's visible key range from
// its definition, the reasons a mask or modifier is refused, and the pair and key counts that
// FLOPs and bytes come from.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sdpa/kernels.hpp"

namespace {

using sdpa::KeyRange;
using sdpa::Mask;
using sdpa::Shape;

std::vector<KeyRange> ranges(const Shape& s, const Mask& m) {
  std::vector<KeyRange> out;
  for (std::int64_t i = 0; i < s.n_q; ++i) out.push_back(m.visible(s, i));
  return out;
}

}  // namespace

TEST_CASE("mask: each row's keys, aligned to the end of the keys") {
  const Shape s{.n_q = 4, .n_kv = 6};  // rows at positions 2..5
  CHECK(ranges(s, {}) == std::vector<KeyRange>{{0, 6}, {0, 6}, {0, 6}, {0, 6}});
  CHECK(ranges(s, {.causal = true}) == std::vector<KeyRange>{{0, 3}, {0, 4}, {0, 5}, {0, 6}});
  // A window of 1 (Mistral's W = 1: window_left 0) sees only its own position.
  CHECK(ranges(s, {.causal = true, .window_left = 0}) ==
        std::vector<KeyRange>{{2, 3}, {3, 4}, {4, 5}, {5, 6}});
  // A window wider than the keys is the causal mask.
  CHECK(ranges(s, {.causal = true, .window_left = 100}) == ranges(s, {.causal = true}));
  CHECK(ranges(s, {.window_left = 1, .window_right = 1}) ==
        std::vector<KeyRange>{{1, 4}, {2, 5}, {3, 6}, {4, 6}});
  // Prefix-LM: the first 4 keys seen by every row, causal after them.
  CHECK(ranges(s, {.causal = true, .prefix = 4}) ==
        std::vector<KeyRange>{{0, 4}, {0, 4}, {0, 5}, {0, 6}});
  // Chunks of 4: positions 2, 3 in [0, 4), 4, 5 in [4, 8) cut to the keys.
  CHECK(ranges(s, {.causal = true, .chunk = 4}) ==
        std::vector<KeyRange>{{0, 3}, {0, 4}, {4, 5}, {4, 6}});
  CHECK(ranges(s, {.chunk = 4}) == std::vector<KeyRange>{{0, 4}, {0, 4}, {4, 6}, {4, 6}});
  // Documents [0, 3), [3, 5) and [5, 6): the last of one token.
  const std::vector<std::int64_t> docs{0, 3, 5};
  CHECK(ranges(s, {.documents = docs}) == std::vector<KeyRange>{{0, 3}, {3, 5}, {3, 5}, {5, 6}});
  CHECK(ranges(s, {.causal = true, .documents = docs}) ==
        std::vector<KeyRange>{{0, 3}, {3, 4}, {3, 5}, {5, 6}});
}

TEST_CASE("mask: rows before the keys (n_q > n_kv) see no key of a chunk or a document") {
  const Shape s{.n_q = 5, .n_kv = 3};  // rows at positions -2..2
  CHECK(ranges(s, {.causal = true}) ==
        std::vector<KeyRange>{{0, 0}, {0, 0}, {0, 1}, {0, 2}, {0, 3}});
  // Mask::visible returns empty ranges as {b, b}; only their size matters.
  const std::vector<std::int64_t> two_docs{0, 2};
  for (const Mask& m : {Mask{.chunk = 2}, Mask{.documents = two_docs}}) {
    const auto r = ranges(s, m);
    CHECK(r[0].size() == 0);
    CHECK(r[1].size() == 0);
    CHECK(r[2].size() > 0);
  }
  const std::vector<std::int64_t> docs{0, 2};
  CHECK(ranges(s, {.documents = docs})[4] == KeyRange{2, 3});
  CHECK(ranges(s, {.chunk = 2})[3] == KeyRange{0, 2});
}

TEST_CASE("mask: mask_problem names what cannot apply") {
  const Shape s{.batch_heads = 4, .n_q = 3, .n_kv = 10};
  const std::vector<std::int64_t> bad_start{1, 4}, not_ascending{0, 4, 4}, past{0, 10}, ok{0, 9};
  const std::vector<float> two{1, 2}, three{1, 2, 3}, temp3{1, 1, 1}, temp2{1, 1}, nan_sink{NAN},
      inf_sink{INFINITY}, minus_inf{-INFINITY}, zero_temp{1, 0, 1};
  CHECK(sdpa::mask_problem(s, {}, {}).empty());
  CHECK(sdpa::mask_problem(s, {.prefix = -1}, {}).find("prefix") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {.window_left = -2}, {}).find("window") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {.chunk = -1}, {}).find("chunk") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {.documents = bad_start}, {}).find("position 0") !=
        std::string::npos);
  CHECK(sdpa::mask_problem(s, {.documents = not_ascending}, {}).find("ascend") !=
        std::string::npos);
  CHECK(sdpa::mask_problem(s, {.documents = past}, {}).find("past") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {.documents = ok}, {}).empty());
  for (const float c : {-1.0f, NAN, INFINITY})
    CHECK(sdpa::mask_problem(s, {}, {.softcap = c}).find("soft-cap") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {}, {.alibi_slopes = three}).find("ALiBi") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {}, {.sinks = three}).find("sink") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {}, {.sinks = two}).empty());
  CHECK(sdpa::mask_problem(s, {}, {.sinks = minus_inf}).empty());
  CHECK(!sdpa::mask_problem(s, {}, {.sinks = nan_sink}).empty());
  CHECK(!sdpa::mask_problem(s, {}, {.sinks = inf_sink}).empty());
  CHECK(sdpa::mask_problem(s, {}, {.temperature = temp3}).empty());
  CHECK(sdpa::mask_problem(s, {}, {.temperature = temp2}).find("temperature") != std::string::npos);
  CHECK(sdpa::mask_problem(s, {}, {.temperature = zero_temp}).find("temperature") !=
        std::string::npos);
}

TEST_CASE("mask: visible pairs and the union of visible keys") {
  const Shape square{.n_q = 10, .n_kv = 10};
  CHECK(sdpa::visible_pairs(square, {}) == 100);
  CHECK(sdpa::visible_pairs(square, {.causal = true}) == 55);
  CHECK(sdpa::visible_pairs(square, {.causal = true, .window_left = 0}) == 10);
  CHECK(sdpa::visible_pairs(square, {.causal = true, .window_left = 2}) == 1 + 2 + 8 * 3);
  CHECK(sdpa::visible_pairs(square, {.chunk = 4}) == 4 * 4 + 4 * 4 + 2 * 2);
  CHECK(sdpa::visible_keys_union(square, {.causal = true, .window_left = 2}) == 10);
  // Decode with a window of 128 over a cache of 300 reads only the window.
  const Shape decode{.n_q = 1, .n_kv = 300};
  CHECK(sdpa::visible_pairs(decode, {.causal = true, .window_left = 127}) == 128);
  CHECK(sdpa::visible_keys_union(decode, {.causal = true, .window_left = 127}) == 128);
  CHECK(sdpa::visible_keys_union(decode, {.causal = true}) == 300);
  // Rows before the keys count nothing; the union is the keys some row sees.
  const Shape before{.n_q = 5, .n_kv = 3};
  CHECK(sdpa::visible_pairs(before, {.causal = true}) == 6);
  CHECK(sdpa::visible_pairs(before, {.chunk = 2}) == 2 + 2 + 1);
  CHECK(sdpa::visible_keys_union(before, {.chunk = 2}) == 3);
  // Each pair summed from the ranges, on every mask of a few shapes.
  const std::vector<std::int64_t> docs{0, 1, 7};
  for (const Shape& s : {square, decode, before, Shape{.n_q = 7, .n_kv = 9}})
    for (const Mask& m :
         {Mask{.causal = true, .prefix = 3}, Mask{.window_left = 1, .window_right = 2},
          Mask{.causal = true, .chunk = 3}, Mask{.documents = docs}}) {
      if (!m.documents.empty() && s.n_kv <= 7) continue;
      double pairs = 0;
      std::vector<bool> seen(std::size_t(s.n_kv), false);
      for (std::int64_t i = 0; i < s.n_q; ++i) {
        const KeyRange r = m.visible(s, i);
        pairs += double(r.size());
        for (std::int64_t j = r.begin; j < r.end; ++j) seen[std::size_t(j)] = true;
      }
      CHECK(sdpa::visible_pairs(s, m) == pairs);
      CHECK(sdpa::visible_keys_union(s, m) == std::count(seen.begin(), seen.end(), true));
    }
}

TEST_CASE("row logits: temperature, soft-cap, ALiBi and sink in the documented order") {
  const Shape s{.batch_heads = 4, .n_q = 2, .n_kv = 5};
  const std::vector<float> slopes{0.5f, 0.25f}, sinks{-1.0f, 3.0f}, temp{2.0f, 0.5f};
  const sdpa::ScoreMod mod{
      .softcap = 4, .alibi_slopes = slopes, .sinks = sinks, .temperature = temp};
  // Batch head 3 uses entry 3 % 2 = 1; row 1 sits at position 4.
  const sdpa::RowLogits r = sdpa::row_logits(s, mod, 0.5f, 3, 1);
  CHECK(r.scale == 0.25f);
  CHECK(r.slope == 0.25f);
  CHECK(r.sink == 3.0f);
  CHECK(r.position == 4);
  const double dot = 6, want = 4 * std::tanh(0.25 * dot / 4) - 0.25 * (4 - 1);
  CHECK(r.logit<double>(dot, 1) == doctest::Approx(want).epsilon(1e-7));
  const double capped = r.cap<double>(0.25 * dot);
  CHECK(r.cap_derivative(capped) ==
        doctest::Approx(1 - std::pow(std::tanh(0.25 * dot / 4), 2)).epsilon(1e-12));
  const sdpa::RowLogits plain = sdpa::row_logits(s, {}, 0.5f, 0, 0);
  CHECK(plain.sink == -std::numeric_limits<float>::infinity());
  CHECK(plain.logit<double>(dot, 0) == 0.5 * dot);
  CHECK(plain.cap_derivative(3.0) == 1);
}
