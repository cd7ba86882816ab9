// What a query row sees and how its scores are modified (docs/design.md, "Masks and score
// modifiers"): the mask and score modifier every kernel takes with its arguments. The names
// follow what users know: FlexAttention's mask_mod and score_mod, ggml's logit_softcap, max_bias
// (ALiBi) and sinks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace sdpa {

struct Shape;

// Keys [begin, end) of a row; empty when end <= begin.
struct KeyRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end > begin ? end - begin : 0; }
  bool operator==(const KeyRange&) const = default;
};

// Which keys each query row sees: always one contiguous range, so that fused kernels skip the
// key tiles no row of a block can see. Query row i sits at key position p = i + (n_kv - n_q)
// (aligned to the end, as in decoding with a KV cache). The range is the intersection of:
//  - causal: keys j <= p, widened to j < prefix for a prefix-LM (the first `prefix` keys are
//    seen by every row: bidirectional inside the prefix, causal after it);
//  - a sliding window: p - window_left <= j <= p + window_right (-1: unbounded on that side;
//    Mistral's window W is causal with window_left = W - 1);
//  - chunks: j in the chunk of `chunk` positions that holds p (Llama 4's chunked layers);
//  - documents: j in the document that holds p, documents given by their start positions
//    (ascending, the first 0) in a packed sequence of n_kv tokens.
struct Mask {
  bool causal = false;
  std::int64_t prefix = 0;
  std::int64_t window_left = -1, window_right = -1;
  std::int64_t chunk = 0;  // 0: no chunks
  std::span<const std::int64_t> documents = {};

  static Mask full() { return {}; }

  KeyRange visible(const Shape& s, std::int64_t i) const;
  // Whether every row sees every key: no mask at all.
  bool none() const {
    return !causal && window_left < 0 && window_right < 0 && chunk == 0 && documents.empty();
  }
  // Whether a row's range can start after key 0 (windows, chunks, documents): kernels that
  // assume prefixes refuse such masks.
  bool starts_late() const { return window_left >= 0 || chunk > 0 || documents.size() > 1; }
};

// How a row's scaled score s = scale * q.k becomes the logit its softmax sees, in this order:
// the row's temperature multiplies the scale; the soft-cap bounds it, softcap * tanh(s /
// softcap) (Gemma 2); ALiBi adds -slope * |p - j| (BLOOM, MPT); the mask sets hidden keys to
// -inf; a sink joins the softmax's denominator as one more logit without a value (gpt-oss).
// Per-head arrays have one entry per query head, and batch head b uses entry b % size (the
// batch-major layout [batch, heads]).
struct ScoreMod {
  float softcap = 0;                         // 0: none
  std::span<const float> alibi_slopes = {};  // per query head; empty: none
  std::span<const float> sinks = {};         // per query head, logits; empty: none
  std::span<const float> temperature = {};   // per query row (n_q); empty: 1
  bool none() const {
    return softcap == 0 && alibi_slopes.empty() && sinks.empty() && temperature.empty();
  }
};

// ALiBi's standard slopes for `heads` query heads: head h (from 0) gets 2^(-8 (h + 1) / heads),
// the geometric sequence of the ALiBi paper (for a power of two, also ggml's with max_bias 8).
std::vector<float> alibi_slopes(std::int64_t heads);

// Llama 4's attention temperature tuning on its global (NoPE) layers, one per query row: the
// row at key position p is scaled by 1 + 0.1 log(floor((p + 1) / 8192) + 1) (attn_scale 0.1,
// floor_scale 8192 in its config.json, as transformers' Llama4TextAttention applies them), so
// rows before position 8191 keep 1.
std::vector<float> llama4_temperature(const Shape& s);

// Why a mask and modifier cannot apply to a shape (a window below -1, a soft-cap that is not a
// positive finite number, per-head arrays whose length does not divide batch_heads, a
// temperature per row of another length, documents that do not start at 0, ascend and stay
// inside n_kv), "" when they can. Kernels and configs check through it.
std::string mask_problem(const Shape& s, const Mask& mask, const ScoreMod& mod);

// Visible (query, key) pairs of one head, summed over its rows: what FLOPs are counted from.
double visible_pairs(const Shape& s, const Mask& mask);
// Keys of one K/V head that at least one row sees: what bytes are counted from.
std::int64_t visible_keys_union(const Shape& s, const Mask& mask);

// One row's logits: how row i of batch head b turns a dot product q.k into what its softmax
// sees. Scalar kernels call logit(); tiled kernels apply the same steps to a tile.
struct RowLogits {
  float scale = 1;  // the call's scale times the row's temperature
  float softcap = 0;
  float slope = 0;                                       // ALiBi: 0 none
  std::int64_t position = 0;                             // the row's key position p
  float sink = -std::numeric_limits<float>::infinity();  // -inf: none

  // softcap * tanh(s / softcap), or s without a soft-cap.
  template <typename T>
  T cap(T scaled) const {
    return softcap > 0 ? T(softcap) * std::tanh(scaled / T(softcap)) : scaled;
  }
  // ALiBi's bias of key j: -slope * |p - j|.
  template <typename T>
  T bias(std::int64_t j) const {
    return slope == 0 ? T(0) : -T(slope) * T(position > j ? position - j : j - position);
  }
  template <typename T>
  T logit(T dot, std::int64_t j) const {
    return cap(T(scale) * dot) + bias<T>(j);
  }
  // d cap(s) / d s at a capped value c = cap(s): the soft-cap's 1 - tanh^2 (1 without one).
  template <typename T>
  T cap_derivative(T capped) const {
    if (!(softcap > 0)) return T(1);
    const T t = capped / T(softcap);
    return T(1) - t * t;
  }
};

// Row i of batch head b: its scale (times its temperature), the soft-cap, its head's slope and
// sink, and its key position.
RowLogits row_logits(const Shape& s, const ScoreMod& mod, float scale, std::int64_t b,
                     std::int64_t i);

}  // namespace sdpa
