// Peak loops of the roofline (sdpa/peak.hpp), one source compiled by Highway for every target.
// A target is called by name through its entry in the HWY_EXPORT table rather than through
// dynamic dispatch, so AVX2 can be measured on an AVX-512 machine.

// Every attainable target, the scalar fallback included: a build whose baseline already has SIMD
// (aarch64: NEON) would otherwise compile no scalar copy to measure "scalar" with.
#define HWY_COMPILE_ALL_ATTAINABLE
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "peak.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>
// clang-format on

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace sdpa::peak {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int Lanes() { return static_cast<int>(hn::Lanes(hn::ScalableTag<float>())); }

// kChains (12) accumulators, written out: each must live in its own register, and arrays of
// vectors are not allowed on every target (SVE, RVV).
float MultiplyAddChains(std::int64_t steps, float a, float b) {
  const hn::ScalableTag<float> d;
  const auto va = hn::Set(d, a), vb = hn::Set(d, b);
  // Distinct starting values: identical chains could be merged by the compiler.
  auto c0 = hn::Set(d, 1.00f), c1 = hn::Set(d, 1.01f), c2 = hn::Set(d, 1.02f);
  auto c3 = hn::Set(d, 1.03f), c4 = hn::Set(d, 1.04f), c5 = hn::Set(d, 1.05f);
  auto c6 = hn::Set(d, 1.06f), c7 = hn::Set(d, 1.07f), c8 = hn::Set(d, 1.08f);
  auto c9 = hn::Set(d, 1.09f), c10 = hn::Set(d, 1.10f), c11 = hn::Set(d, 1.11f);
  for (std::int64_t s = 0; s < steps; ++s) {
    c0 = hn::MulAdd(c0, va, vb), c1 = hn::MulAdd(c1, va, vb), c2 = hn::MulAdd(c2, va, vb);
    c3 = hn::MulAdd(c3, va, vb), c4 = hn::MulAdd(c4, va, vb), c5 = hn::MulAdd(c5, va, vb);
    c6 = hn::MulAdd(c6, va, vb), c7 = hn::MulAdd(c7, va, vb), c8 = hn::MulAdd(c8, va, vb);
    c9 = hn::MulAdd(c9, va, vb), c10 = hn::MulAdd(c10, va, vb), c11 = hn::MulAdd(c11, va, vb);
  }
  const auto sum = hn::Add(
      hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)), hn::Add(hn::Add(c4, c5), hn::Add(c6, c7))),
      hn::Add(hn::Add(c8, c9), hn::Add(c10, c11)));
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

void Triad(float* x, const float* y, const float* z, float s, std::int64_t n) {
  const hn::ScalableTag<float> d;
  const auto vs = hn::Set(d, s);
  const auto step = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + step <= n; i += step)
    hn::StoreU(hn::MulAdd(vs, hn::LoadU(d, z + i), hn::LoadU(d, y + i)), d, x + i);
  for (; i < n; ++i) x[i] = y[i] + s * z[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace sdpa::peak
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>

#include "bf16.hpp"
#include "kv_int8.hpp"
#include "sdpa/peak.hpp"

namespace sdpa::peak {

HWY_EXPORT(Lanes);
HWY_EXPORT(MultiplyAddChains);
HWY_EXPORT(Triad);

namespace {

struct Target {
  const char* name;
  std::int64_t bits;  // Highway target bit(s)
};

// Our ISA names (those of the kernels' registry entries, see hwy_targets.hpp) and the Highway
// targets they stand for, narrowest first per architecture. "scalar" is Highway's fallback
// (HWY_SCALAR or HWY_EMU128, whichever this build uses), compiled for the baseline ISA. Every
// name is known on every build, so one config runs anywhere: another architecture's ISAs are
// just not supported here.
constexpr Target kTargets[] = {
    {"scalar", HWY_SCALAR | HWY_EMU128},
    {"sse4", HWY_SSE4},
    {"sse4-int8", HWY_SSE4},  // SSSE3's int8 dots beside SSE4 (kInt8Roofs below)
    {"avx2", HWY_AVX2},
    {"avx2-int8", HWY_AVX2},  // AVX2's int8 dots (kInt8Roofs below)
    {"avx-vnni", HWY_AVX2},   // AVX2 with AVX-VNNI (kInt8Roofs below)
    {"avx512", HWY_AVX3},
    {"avx512-int8", HWY_AVX3},  // AVX512BW's int8 dots (kInt8Roofs below)
    {"avx512-bf16", HWY_AVX3},  // AVX-512 with AVX512_BF16 (kBf16Isa below)
    {"avx512-vnni", HWY_AVX3},  // AVX-512 with AVX512_VNNI (kInt8Roofs below)
    {"neon", HWY_NEON},
    {"neon-dotprod", HWY_NEON},  // NEON with sdot (kInt8Roofs below)
    {"sve-256", HWY_SVE_256},
    {"sve2-128", HWY_SVE2_128},
};

// The bf16 roof: its multiply-adds are vdpbf16ps (bf16 pairs into fp32: 32 a vector, the
// native products of flash-bf16, sdpa/kernels.hpp), its triad AVX-512's.
constexpr std::string_view kBf16Isa = "avx512-bf16";
// The int8 roofs: the dot products of flash-kv-int8's scores (kv_int8.hpp), each int8 product
// counted as a multiply-add (2 ops) like an FMA lane; the triad is that of the Highway target
// they run beside (kTargets). sse4-int8 and avx2-int8 step through (v)psignb, (v)pmaddubsw,
// (v)pmaddwd and (v)paddd for 16 and 32 products, avx512-int8 the same in zmm (a masked vpsubb
// for vpsignb) for 64; avx-vnni and avx512-vnni through one vpdpbusd for 32 and 64; neon-dotprod
// through one sdot for 16.
struct Int8Roof {
  std::string_view isa;
  detail::Int8Dots dots;
};
constexpr Int8Roof kInt8Roofs[] = {{"sse4-int8", detail::Int8Dots::sse4},
                                   {"avx2-int8", detail::Int8Dots::avx2},
                                   {"avx512-int8", detail::Int8Dots::avx512},
                                   {"avx-vnni", detail::Int8Dots::avx_vnni},
                                   {"avx512-vnni", detail::Int8Dots::avx512_vnni},
                                   {"neon-dotprod", detail::Int8Dots::neon_dotprod}};

const Int8Roof* find_int8_roof(std::string_view isa) {
  for (const auto& r : kInt8Roofs)
    if (isa == r.isa) return &r;
  return nullptr;
}

const Target* find_target(std::string_view isa) {
  for (const auto& t : kTargets)
    if (isa == t.name) return &t;
  return nullptr;
}

// The slot of `bits` in an HWY_EXPORT table: the fallback is the last slot; a dynamic target
// sits where Highway's ChosenTarget mask would put it.
std::size_t table_index(std::int64_t bits) {
  if (bits & (HWY_SCALAR | HWY_EMU128)) return HWY_MAX_DYNAMIC_TARGETS + 1;
  return hwy::Num0BitsBelowLS1Bit_Nonzero64(
      static_cast<std::uint64_t>(HWY_CHOSEN_TARGET_SHIFT(bits)));
}

template <typename Fn>
Fn entry(Fn const* table, std::string_view isa) {
  return table[table_index(find_target(isa)->bits)];
}

}  // namespace

const std::vector<std::string>& known_isas() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& t : kTargets) out.emplace_back(t.name);
    return out;
  }();
  return names;
}

bool isa_supported(std::string_view isa) {
  if (isa == kBf16Isa) return detail::bf16_native_available() && isa_supported("avx512");
  if (const Int8Roof* r = find_int8_roof(isa); r && !detail::int8_dots_available(r->dots))
    return false;
  const Target* t = find_target(isa);
  if (t == nullptr || (t->bits & HWY_TARGETS) == 0) return false;
  if (t->bits & (HWY_SCALAR | HWY_EMU128)) return true;
  return (t->bits & hwy::SupportedTargets()) != 0;
}

bool dot_product_isa(std::string_view isa) {
  return isa == kBf16Isa || find_int8_roof(isa) != nullptr;
}

std::vector<std::string> supported_isas() {
  std::vector<std::string> out;
  for (const auto& name : known_isas())
    if (isa_supported(name)) out.push_back(name);
  return out;
}

std::string roof_isa(std::string_view kernel_isa) {
  if (isa_supported(kernel_isa)) return std::string(kernel_isa);
  if (kernel_isa == "openblas") {
    const auto isas = supported_isas();
    for (auto it = isas.rbegin(); it != isas.rend(); ++it)
      if (!dot_product_isa(*it)) return *it;
  }
  return "";
}

int lanes(std::string_view isa) {
  if (isa == kBf16Isa) return 32;
  if (const Int8Roof* r = find_int8_roof(isa)) return detail::int8_dot_lanes(r->dots);
  return entry(HWY_DISPATCH_TABLE(Lanes), isa)();
}

float multiply_add_chains(std::string_view isa, std::int64_t steps, float a, float b) {
  if (isa == kBf16Isa) return detail::bf16_dot_chains(steps);
  if (const Int8Roof* r = find_int8_roof(isa)) return detail::int8_dot_chains(r->dots, steps);
  return entry(HWY_DISPATCH_TABLE(MultiplyAddChains), isa)(steps, a, b);
}

double multiply_add_flops(std::string_view isa, std::int64_t steps) {
  return 2.0 * kChains * lanes(isa) * double(steps);
}

void triad(std::string_view isa, float* x, const float* y, const float* z, float s,
           std::int64_t n) {
  entry(HWY_DISPATCH_TABLE(Triad), isa)(x, y, z, s, n);
}

}  // namespace sdpa::peak
#endif  // HWY_ONCE
