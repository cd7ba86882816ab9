// flash-kv-int8 (precision "kv-int8"): flash with K and V stored as int8 with an fp32 scale per
// token and K/V head (kv_int8.hpp: symmetric, max|x| / 127), the quantised KV cache of
// OpenVINO's and llama.cpp's CPU paths. K and V are stored once (Kernel::store_kv, outside the
// timed call, as a cache is; a call without a stored cache stores its own) and read at a byte
// per element plus the scales. Q is rounded the same way, per row, at the call (as llama.cpp
// quantises the activation row before its integer dot products), so the kernel computes
// attention of Q, K and V each rounded per row to int8:
//  - decode shapes: flash's decode path (attention_decode-inl.h) through kv_int8-inl.h's hooks:
//    the block's rows of scale Q quantised per tile, S = exact int32 dot products (vpdpbusd:
//    flash-kv-int8@avx512-vnni, @avx-vnni; vpmaddubsw: @avx512, @avx2; sdot: @neon-dotprod; plain
//    C++ elsewhere: the same bits, kv_int8.hpp) times the two rows' scales, the online softmax in
//    fp32, and V widened to fp32 (int8 x scale) in registers as P V loads it;
//  - any other shape: Q, K and V rounded (dequantised) to fp32 once per call and flash's tiles
//    run on them, as flash-kv-f16 does for prefill (compute-bound: the O(n d) widening is small).
// Both compute on the same rounded values (Q of the decode path is scale Q rounded, of the other
// scale x Q-rounded: one fp32 rounding of the scale apart), on any thread count the same bits.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cached_scratch.hpp"
#include "kv_int8.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash_kv_int8.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
#include "kv_int8-inl.h"
#include "attention_decode-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

void Int8Forward(const ForwardArgs& a, Int8ScoresFn scores) {
  if (const std::string why = int8_refusal(a.shape, a.mask, a.score_mod); !why.empty())
    throw std::invalid_argument(why);
  std::unique_ptr<StoredKv> own;
  const StoredKvInt8& kv = stored_kv_int8(a, own);
  const Shape& s = a.shape;
  const Int8Rows v{kv.v.data(), kv.v_scale.data(), s.d_v, s.d_v, nullptr};
  if (is_decode_shape(s)) {
    const Int8Rows k{kv.k.data(), kv.k_scale.data(), s.d_k, kv.d4, scores};
    return DecodeForward<HwyLanes, Int8Rows>(a, DecodeKv{&k, &v});
  }
  float* qw = kept_input(KeptInput::kQ, s.q_elements());
  float* kw = kept_input(KeptInput::kK, s.k_elements());
  float* vw = kept_input(KeptInput::kV, s.v_elements());
  int8_round_rows(a.q, s.rows(), s.d_k, qw, a.threads);
  const std::int64_t kv_rows = s.kv_batch_heads() * s.n_kv;
#pragma omp parallel for num_threads(a.threads) schedule(static)
  for (std::int64_t r = 0; r < kv_rows; ++r) {
    dequantise_k_row(kv, r, kw + r * s.d_k);
    WidenRows(v + r * s.d_v, 1, s.d_v, s.d_v, vw + r * s.d_v, s.d_v);
  }
  ForwardArgs wide = a;
  wide.q = qw;
  wide.k = kw;
  wide.v = vw;
  wide.stored_kv = nullptr;
  HwyTiledForward(wide, kFlashKeys);
}

void KvInt8Forward(const ForwardArgs& a) { Int8Forward(a, &int8_scores_portable); }
void KvInt8Sse4Forward(const ForwardArgs& a) { Int8Forward(a, int8_scores(Int8Dots::sse4)); }
void KvInt8Avx2Forward(const ForwardArgs& a) { Int8Forward(a, int8_scores(Int8Dots::avx2)); }
void KvInt8Avx512Forward(const ForwardArgs& a) { Int8Forward(a, int8_scores(Int8Dots::avx512)); }
void KvInt8AvxVnniForward(const ForwardArgs& a) { Int8Forward(a, int8_scores(Int8Dots::avx_vnni)); }
void KvInt8Avx512VnniForward(const ForwardArgs& a) {
  Int8Forward(a, int8_scores(Int8Dots::avx512_vnni));
}
void KvInt8NeonDotprodForward(const ForwardArgs& a) {
  Int8Forward(a, int8_scores(Int8Dots::neon_dotprod));
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(KvInt8Forward);
HWY_EXPORT(KvInt8Sse4Forward);
HWY_EXPORT(KvInt8Avx2Forward);
HWY_EXPORT(KvInt8Avx512Forward);
HWY_EXPORT(KvInt8AvxVnniForward);
HWY_EXPORT(KvInt8Avx512VnniForward);
HWY_EXPORT(KvInt8NeonDotprodForward);

namespace {

// K and V stored (K rows of d4 bytes, V of d_v, an fp32 scale per row of each); decode shapes
// add the decode path's workspace, others Q, K and V in fp32 and the tiles' scratch.
double flash_kv_int8_workspace(const Shape& s, Pass, int threads) {
  const double rows = double(s.kv_batch_heads() * s.n_kv);
  const double stored = rows * double(int8_depth(s.d_k) + s.d_v + 2 * sizeof(float));
  if (is_decode_shape(s)) return stored + decode_workspace_bytes(s, threads);
  return stored + sizeof(float) * double(s.q_elements() + s.k_elements() + s.v_elements()) +
         tiled_workspace_bytes(s, kFlashKeys, kMaxLanes, threads);
}

}  // namespace

std::vector<Kernel> flash_kv_int8_kernels() {
  const char* what = "flash, K and V stored in int8 with a scale per token and head";
  const auto targets = supported_targets(HWY_DISPATCH_TABLE(KvInt8Forward));
  auto entries = per_target_kernels("flash-kv-int8", std::string(what) + ", portable int8 dots",
                                    targets, &flash_kv_int8_workspace);
  for (auto& k : entries) {
    k.precision = "kv-int8";
    k.store_kv = &store_kv_int8;
    k.kv_element_bytes = 1;
    k.kv_row_bytes = sizeof(float);
    k.refuses = &int8_refusal;
  }
  // The entries whose scores are an instruction set's own dots (kv_int8.hpp), each on the
  // Highway target `base` of its vectors, whose fp32 multiply-adds do the rest (fp32_isa):
  // family@avx512, family@avx2 and family@sse4 themselves (vpmaddubsw and pmaddubsw; their roofs
  // avx512-int8, avx2-int8 and sse4-int8), family@avx-vnni before family@avx2, family@avx512-vnni
  // before family@avx512, and on aarch64 family@neon-dotprod (sdot) before family@neon.
  const auto on = [](const auto& table, std::string_view isa) -> ForwardFn {
    for (const auto& t : supported_targets(table))
      if (t.isa == isa) return t.fn;
    return nullptr;
  };
  struct Native {
    Int8Dots dots;
    const char *base, *isa, *dot_isa, *instruction;
    ForwardFn forward;
  };
  // Widest first: the first this CPU runs is also the family's best entry (on an Arm CPU with
  // SVE and sdot, @neon-dotprod before @sve-256: not measured, there is no Arm host here).
  const Native natives[] = {{Int8Dots::avx512_vnni, "avx512", "avx512-vnni", "", "vpdpbusd",
                             on(HWY_DISPATCH_TABLE(KvInt8Avx512VnniForward), "avx512")},
                            {Int8Dots::avx512, "avx512", "avx512", "avx512-int8", "vpmaddubsw",
                             on(HWY_DISPATCH_TABLE(KvInt8Avx512Forward), "avx512")},
                            {Int8Dots::avx_vnni, "avx2", "avx-vnni", "", "vpdpbusd",
                             on(HWY_DISPATCH_TABLE(KvInt8AvxVnniForward), "avx2")},
                            {Int8Dots::avx2, "avx2", "avx2", "avx2-int8", "vpmaddubsw",
                             on(HWY_DISPATCH_TABLE(KvInt8Avx2Forward), "avx2")},
                            {Int8Dots::sse4, "sse4", "sse4", "sse4-int8", "pmaddubsw",
                             on(HWY_DISPATCH_TABLE(KvInt8Sse4Forward), "sse4")},
                            {Int8Dots::neon_dotprod, "neon", "neon-dotprod", "", "sdot",
                             on(HWY_DISPATCH_TABLE(KvInt8NeonDotprodForward), "neon")}};
  std::optional<Kernel> best;
  for (const Native& n : natives) {
    const auto at = std::find_if(entries.begin(), entries.end(), [&](const Kernel& k) {
      return k.name == "flash-kv-int8@" + std::string(n.base);
    });
    if (at == entries.end() || !int8_dots_available(n.dots)) continue;
    Kernel k = *at;
    k.name = "flash-kv-int8@" + std::string(n.isa);
    k.isa = n.isa;
    k.dot_isa = n.dot_isa;
    k.fp32_isa = n.base;
    k.description = std::string(what) + ", " + n.instruction + " (" + n.isa + ")";
    k.forward = n.forward;
    if (k.isa == n.base)
      *at = k;
    else
      entries.insert(at, k);
    if (!best) best = k;
  }
  if (best) {
    entries.front() = *best;
    entries.front().name = "flash-kv-int8";
  }
  return entries;
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
