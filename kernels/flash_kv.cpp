// flash-kv-f16 and flash-kv-bf16 (precision "kv-fp16", "kv-bf16"): flash with K and V stored in
// 16 bits, everything else fp32, the KV-cache format of CPU inference engines (llama.cpp's
// default f16 cache, bf16 in PyTorch and oneDNN). K and V are stored once (Kernel::store_kv,
// outside the timed call, as a cache is; a call without a stored cache stores its own), read
// at half the bytes and widened to fp32 where they are read, which is exact (kv_formats.hpp):
//  - decode shapes: flash's decode path (attention_decode-inl.h) on the stored elements, keys
//    and values widened in registers as they are loaded (keys of blocks of kQueryLanesRows
//    rows or more, and short groups, are widened into k_pack first);
//  - any other shape: K and V widened to fp32 once per call and flash's tiles run on them
//    (prefill is compute-bound; the widening costs O(n_kv d) of O(n_q n_kv d) work).
// So the kernel's arithmetic is flash's on the rounded K and V: the same bits as flash given
// K and V rounded to the format, on any thread count.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cached_scratch.hpp"
#include "kv_formats.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash_kv.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
#include "attention_decode-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

// The call's K and V as stored (the caller's, or stored here for this call only), read as E.
template <class E, KvFormat kFormat>
void KvForward(const ForwardArgs& a) {
  std::unique_ptr<StoredKv> own;
  const StoredKv16& stored = stored_kv16(a, kFormat, own);
  const Shape& s = a.shape;
  const auto* k = reinterpret_cast<const E*>(stored.k.data());
  const auto* v = reinterpret_cast<const E*>(stored.v.data());
  if (is_decode_shape(s)) return DecodeForward<HwyLanes, E>(a, DecodeKv{k, v});
  float* kw = kept_input(KeptInput::kK, s.k_elements());
  float* vw = kept_input(KeptInput::kV, s.v_elements());
  const std::int64_t kv_rows = s.kv_batch_heads() * s.n_kv;
#pragma omp parallel for num_threads(a.threads) schedule(static)
  for (std::int64_t r = 0; r < kv_rows; ++r) {
    WidenRows(k + r * s.d_k, 1, s.d_k, s.d_k, kw + r * s.d_k, s.d_k);
    WidenRows(v + r * s.d_v, 1, s.d_v, s.d_v, vw + r * s.d_v, s.d_v);
  }
  ForwardArgs wide = a;
  wide.k = kw;
  wide.v = vw;
  HwyTiledForward(wide, kFlashKeys);
}

void KvF16Forward(const ForwardArgs& a) { KvForward<hwy::float16_t, KvFormat::kF16>(a); }
void KvBf16Forward(const ForwardArgs& a) { KvForward<hwy::bfloat16_t, KvFormat::kBf16>(a); }

// n binary16 values widened as the kernels widen them (WidenRows: WideLoad's vectors, the tail
// by WideScalar), for the test that checks every binary16 value on every target.
void WidenF16(const std::uint16_t* x, float* y, std::int64_t n) {
  WidenRows(reinterpret_cast<const hwy::float16_t*>(x), 1, n, n, y, n);
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(KvF16Forward);
HWY_EXPORT(KvBf16Forward);
HWY_EXPORT(WidenF16);

std::vector<std::pair<std::string, WidenF16Fn>> f16_widenings() {
  std::vector<std::pair<std::string, WidenF16Fn>> out;
  for (const auto& t : supported_targets(HWY_DISPATCH_TABLE(WidenF16)))
    out.emplace_back(t.isa, t.fn);
  return out;
}

namespace {

// K and V stored in 16 bits; decode shapes add the decode path's workspace, others the fp32
// K and V they widen to and the tiles' scratch.
double flash_kv_workspace(const Shape& s, Pass, int threads) {
  const double kv = double(s.k_elements() + s.v_elements());
  const double stored = 2 * kv;
  if (is_decode_shape(s)) return stored + decode_workspace_bytes(s, threads);
  return stored + sizeof(float) * kv + tiled_workspace_bytes(s, kFlashKeys, kMaxLanes, threads);
}

template <KvFormat kFormat>
std::unique_ptr<StoredKv> store(const ForwardArgs& a) {
  return store_kv16(a, kFormat);
}

std::vector<Kernel> kv_entries(const char* family, const char* precision, const char* what,
                               const std::vector<TargetFn<ForwardFn>>& targets, StoreKvFn store) {
  auto entries = per_target_kernels(family, what, targets, &flash_kv_workspace);
  for (auto& k : entries) {
    k.precision = precision;
    k.store_kv = store;
    k.kv_element_bytes = 2;
  }
  return entries;
}

}  // namespace

std::vector<Kernel> flash_kv_kernels() {
  auto f16 =
      kv_entries("flash-kv-f16", "kv-fp16",
                 "flash, K and V stored in fp16 (F16C where present), fp32 arithmetic",
                 supported_targets(HWY_DISPATCH_TABLE(KvF16Forward)), &store<KvFormat::kF16>);
  auto bf16 =
      kv_entries("flash-kv-bf16", "kv-bf16", "flash, K and V stored in bf16, fp32 arithmetic",
                 supported_targets(HWY_DISPATCH_TABLE(KvBf16Forward)), &store<KvFormat::kBf16>);
  f16.insert(f16.end(), bf16.begin(), bf16.end());
  return f16;
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
