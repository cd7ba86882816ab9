// The bf16 kernels (precision "bf16") against the fp64 reference of the fp32 inputs, with
// tolerances derived from bf16's unit roundoff u = 2^-8 and the shape, and against each other.
//
// Where the kernel rounds (bf16.hpp): q, k, v to bf16 (relative error <= u each), then exact
// products summed in fp32, the scale and softmax in fp32, P to bf16 (<= u), P V summed in fp32:
// each product q_c k_jc moves by at most (1+u)^2 - 1 = 2u + u^2, and each p_j v_jc likewise.
// The bound is the kernel tests' one (tests/attention_catalogue.hpp) with that rounding: the
// logits' errors e_j = (2u + u^2) A_j + u32 [(d_k + 2) (1+u)^2 A_j + ...] move the weights, the
// output, lse and the probes. The test requires max_j (e_j + ebar) <= 1/2, so a case where bf16
// cannot resolve the scores fails loudly instead of passing on a meaningless bound.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_catalogue.hpp"
#include "attention_rows.hpp"
#include "bf16.hpp"
#include "decode_blocks.hpp"
#include "kernels_under_test.hpp"
#include "kv_formats.hpp"
#include "kv_int8.hpp"
#include "run_report.hpp"
#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"

namespace {

using sdpa::Shape;

constexpr double kU = 0x1p-8;     // bf16 unit roundoff (8 significant bits)
constexpr double kU32 = 0x1p-24;  // fp32 unit roundoff
constexpr double kSafety = 2.0;

#if defined(SDPA_SANITIZE) || defined(SDPA_EMULATED)
constexpr std::int64_t kLarge = 200;  // sizes shrink under the sanitizers and qemu, checks do not
#else
constexpr std::int64_t kLarge = 1000;
#endif

std::vector<const sdpa::Kernel*> bf16_kernels() {
  std::vector<const sdpa::Kernel*> out;
  for (const sdpa::Kernel& k : kernels_under_test())
    if (k.precision == "bf16") out.push_back(&k);
  return out;
}

using catalogue::Case;  // the kernel tests' one catalogue and input generator
using catalogue::describe;
using catalogue::max_error;

struct Problem {
  Case c;
  float scale = 1;
  std::vector<float> q, k, v;
  std::vector<double> out, out_tol, lse, lse_tol;
  // The probes of the fp64 scores of the fp32 inputs, and their bounds (above).
  sdpa::RowProbes probes;
  std::vector<double> entropy_tol, max_weight_tol, score_sum_tol, sum_p2_tol;
};

std::vector<float> normals(std::int64_t n, std::mt19937& rng) {
  return catalogue::normals(n, 1, rng);
}

// Where a kernel rounds its operands, for the bound (tests/attention_catalogue.hpp's one table
// per precision): the bf16 kernels round q and k (each <= u), p and v.
using catalogue::Rounding;
const Rounding kBf16Rounding = *catalogue::rounding_of("bf16");

// ---- int8 rounding from its definition, sharing no code with kernels/kv_int8.hpp (the oracle
// of the int8 tests): a row's scale is max|x| / 127 (one fp32 division), each element the
// integer nearest 127 x / max|x|, ties to even; a row of zeros has scale 0, a row with an
// infinity or NaN scale NaN, and all-zero integers. In long double, where 127 x and the tie
// test 2 (127 x) = (2 k + 1) max|x| are exact (at most 33 significant bits of 64).
struct Int8Row {
  float scale = 0;
  std::vector<int> ints;
  // Where 127 x / max|x| is within 2^-12 of a half-integer but not on it: the kernel's fp32
  // arithmetic (x times 127 / max|x|, rounded) may round either way there.
  std::vector<std::int64_t> near_ties;
};

Int8Row int8_oracle(const float* x, std::int64_t n) {
  Int8Row row;
  row.ints.assign(std::size_t(n), 0);
  long double m = 0;
  bool finite = true;
  for (std::int64_t c = 0; c < n; ++c) {
    finite = finite && std::isfinite(x[c]);
    m = std::max(m, std::fabs((long double)x[c]));
  }
  if (!finite) row.scale = NAN;
  if (!finite || m == 0) return row;
  row.scale = float(m) / 127.0f;
  for (std::int64_t c = 0; c < n; ++c) {
    const long double t = 127.0L * x[c], q = t / m, k = std::floor(q);
    long double nearest = q - k < 0.5L ? k : k + 1;
    if (2 * t == (2 * k + 1) * m)
      nearest = std::fmod(k, 2.0L) == 0 ? k : k + 1;  // a tie
    else if (std::fabs(q - k - 0.5L) < 0x1p-12L)
      row.near_ties.push_back(c);
    row.ints[std::size_t(c)] = int(nearest);
  }
  return row;
}

// Moves each element of the rows of x (d each) whose 127 (pre x) / max|pre x| is near a tie
// (Int8Row::near_ties) by a factor 1 + 2^-9 (less than 1/4 of a step; the row's max stays): the
// test's inputs stay where the definition has one answer in fp32.
void off_near_ties(float* x, std::int64_t rows, std::int64_t d, float pre = 1) {
  std::vector<float> scaled(static_cast<std::size_t>(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (;;) {
      for (std::int64_t c = 0; c < d; ++c) scaled[std::size_t(c)] = row[c] * pre;
      const Int8Row q = int8_oracle(scaled.data(), d);
      if (q.near_ties.empty()) break;
      for (const std::int64_t c : q.near_ties) row[c] *= 1 + 0x1p-9f;
    }
  }
}

// Rows of x quantised by the oracle and dequantised in fp32: y = scale x int (one rounding).
void int8_dequantised(const float* x, std::int64_t rows, std::int64_t d, float* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const Int8Row q = int8_oracle(x + r * d, d);
    for (std::int64_t c = 0; c < d; ++c) y[r * d + c] = q.scale * float(q.ints[std::size_t(c)]);
  }
}

// The inputs flash-kv-int8 computes with (kernels/flash_kv_int8.cpp): K and V rounded per row to
// int8, Q too, by the oracle above; on the decode path the rounded row is scale Q's, so the scale
// is then 1.
struct RoundedInputs {
  std::vector<float> q, k, v;
  float scale;
};
RoundedInputs int8_inputs(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, float scale) {
  RoundedInputs r{q, k, v, scale};
  if (sdpa::detail::is_decode_shape(s)) {
    for (float& x : r.q) x *= scale;
    r.scale = 1;
  }
  int8_dequantised(r.q.data(), s.rows(), s.d_k, r.q.data());
  int8_dequantised(k.data(), s.kv_batch_heads() * s.n_kv, s.d_k, r.k.data());
  int8_dequantised(v.data(), s.kv_batch_heads() * s.n_kv, s.d_v, r.v.data());
  return r;
}

// The reference and bounds are those of the fp32 inputs, or with `int8`, of int8_inputs (whose
// rounding the kernel then does not add: rounding = {0, 0}).
Problem make_problem(const Case& c, const Rounding& rounding = kBf16Rounding, bool int8 = false) {
  Problem pr;
  pr.c = c;
  const Shape& s = c.shape;
  catalogue::Inputs in0 = catalogue::random_inputs(s, 1, c.seed);
  pr.q = std::move(in0.q), pr.k = std::move(in0.k), pr.v = std::move(in0.v);
  pr.scale = float(c.scale ? c.scale : 1.0 / std::sqrt(double(s.d_k)));
  if (int8) {
    off_near_ties(pr.q.data(), s.rows(), s.d_k, sdpa::detail::is_decode_shape(s) ? pr.scale : 1);
    off_near_ties(pr.k.data(), s.kv_batch_heads() * s.n_kv, s.d_k);
    off_near_ties(pr.v.data(), s.kv_batch_heads() * s.n_kv, s.d_v);
  }
  const RoundedInputs in =
      int8 ? int8_inputs(s, pr.q, pr.k, pr.v, pr.scale) : RoundedInputs{pr.q, pr.k, pr.v, pr.scale};
  // The one bound of this precision (tests/attention_catalogue.hpp) on the inputs the kernel
  // computes with.
  Case rounded = c;
  rounded.scale = in.scale;
  const catalogue::Expected w =
      catalogue::expected(rounded, catalogue::Inputs{in.q, in.k, in.v}, rounding);
  pr.out = w.out, pr.out_tol = w.out_tol, pr.lse = w.lse, pr.lse_tol = w.lse_tol;
  pr.probes = w.probes;
  pr.entropy_tol = w.entropy_tol, pr.max_weight_tol = w.max_weight_tol;
  pr.score_sum_tol = w.sum_tol, pr.sum_p2_tol = w.p2_tol;
  INFO(describe(c));
  REQUIRE_MESSAGE(w.worst_first_order <= 0.5,
                  "first-order bound invalid: max e_j + ebar = ", w.worst_first_order);
  return pr;
}

struct Outputs {
  std::vector<float> out, lse;
};

// k and v: the keys and values to pass (pr's by default).
Outputs run(const sdpa::Kernel& kern, const Problem& pr, int threads,
            sdpa::RowProbes* probes = nullptr, const float* k = nullptr, const float* v = nullptr) {
  const Shape& s = pr.c.shape;
  Outputs o{std::vector<float>(s.out_elements(), NAN), std::vector<float>(s.rows(), NAN)};
  kern.forward({.shape = s,
                .q = pr.q.data(),
                .k = k ? k : pr.k.data(),
                .v = v ? v : pr.v.data(),
                .out = o.out.data(),
                .lse = o.lse.data(),
                .scale = pr.scale,
                .mask = {.causal = pr.c.causal},
                .threads = threads,
                .probes = probes});
  return o;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// FlashAttention's test rule: the plain composition that rounds at the same places, computed
// naively: q, k, v rounded to bf16, each score summed in fp32 in key order, scaled in fp32,
// softmax in fp32, p rounded to bf16, P V summed in fp32, divided by the fp32 sum of p.
std::vector<float> plain_composition(const Problem& pr) {
  using sdpa::detail::bf16_round;
  const Shape& s = pr.c.shape;
  std::vector<float> out(s.out_elements(), 0.0f);
  std::vector<float> sc, p;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = s.kv_head(r / s.n_q), i = r % s.n_q;
    const std::int64_t n = sdpa::Mask{.causal = pr.c.causal}.visible(s, i).end;
    if (n == 0) continue;
    sc.assign(n, 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::int64_t x = 0; x < s.d_k; ++x)
        acc += bf16_round(pr.q[r * s.d_k + x]) * bf16_round(pr.k[(b * s.n_kv + j) * s.d_k + x]);
      sc[j] = pr.scale * acc;
    }
    const float m = *std::max_element(sc.begin(), sc.end());
    float l = 0;
    p.assign(n, 0.0f);
    for (std::int64_t j = 0; j < n; ++j) l += p[j] = std::exp(sc[j] - m);
    for (std::int64_t x = 0; x < s.d_v; ++x) {
      float acc = 0;
      for (std::int64_t j = 0; j < n; ++j)
        acc += bf16_round(p[j]) * bf16_round(pr.v[(b * s.n_kv + j) * s.d_v + x]);
      out[r * s.d_v + x] = acc / l;
    }
  }
  return out;
}

WorstRatio g_worst_ratio{"err / tolerance of the bf16, K/V storage and int8 kernels"};

// A kernel's probes within their bounds of the fp64 ones (make_problem), on rows that see a key.
void check_probes(const Problem& pr, const sdpa::RowProbes& got) {
  const Shape& s = pr.c.shape;
  const struct {
    const char* name;
    const std::vector<double>&got, &want, &tol;
  } probes[] = {{"entropy", got.entropy, pr.probes.entropy, pr.entropy_tol},
                {"max weight", got.max_weight, pr.probes.max_weight, pr.max_weight_tol},
                {"score sum", got.score_sum, pr.probes.score_sum, pr.score_sum_tol},
                {"sum p^2", got.sum_p2, pr.probes.sum_p2, pr.sum_p2_tol}};
  for (const auto& p : probes) {
    std::int64_t bad = 0;
    double worst = 0;
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      if (sdpa::Mask{.causal = pr.c.causal}.visible(s, r % s.n_q).end == 0) continue;
      const double err = std::abs(p.got[r] - p.want[r]);
      const double ratio = err == 0 ? 0 : err / p.tol[r];
      bad += !(ratio <= 1);
      worst = std::max(worst, ratio);
    }
    g_worst_ratio.add(worst);
    CHECK_MESSAGE(bad == 0, bad, " rows' ", p.name, " outside the bound; worst err/tol ", worst);
  }
}

// Every output and lse of `got` within pr's derived bound.
void check_bound(const Outputs& got, const Problem& pr) {
  const Shape& s = pr.c.shape;
  std::int64_t bad = 0;
  double worst = 0;
  for (std::int64_t x = 0; x < s.out_elements(); ++x) {
    const double err = std::abs(double(got.out[x]) - pr.out[x]);
    const double ratio = err == 0 ? 0 : err / pr.out_tol[x];
    bad += !(ratio <= 1);
    worst = std::max(worst, ratio);
  }
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const bool both_inf =
        std::isinf(got.lse[r]) && std::isinf(pr.lse[r]) && (got.lse[r] > 0) == (pr.lse[r] > 0);
    const double err = both_inf ? 0 : std::abs(double(got.lse[r]) - pr.lse[r]);
    const double ratio = err == 0 ? 0 : err / pr.lse_tol[r];
    bad += !(ratio <= 1);
    worst = std::max(worst, ratio);
  }
  g_worst_ratio.add(worst);
  CHECK_MESSAGE(bad == 0, bad, " outputs or lse outside the bound; worst err/tol ", worst);
}

// Every bf16 kernel within the derived bound and within twice the plain composition's error;
// the same bits with a probe sink and on two threads; the native products' bits equal the
// widened ones' on the same Highway target (bf16.hpp says why they must).
void check_case(const Case& c) {
  const Problem pr = make_problem(c);
  const Shape& s = c.shape;
  const double composition_error = max_error(plain_composition(pr), pr.out);
  const auto kernels = bf16_kernels();
  REQUIRE(!kernels.empty());
  for (const auto* kern : kernels) {
    INFO(kern->name, " on ", describe(c));
    const Outputs got = run(*kern, pr, c.threads);
    check_bound(got, pr);
    const double error = max_error(got.out, pr.out);
    CHECK_MESSAGE(error <= 2 * composition_error, "max error ", error,
                  " vs the plain composition's ", composition_error);

    sdpa::RowProbes probes(s.rows());
    CHECK_MESSAGE(same_bits(run(*kern, pr, 2, &probes).out, got.out),
                  "a probe sink or a second thread changed the output");
    check_probes(pr, probes);
    // The widened products on the best target are the native ones' twin.
    const sdpa::Kernel* native = sdpa::find_kernel("flash-bf16@avx512-bf16");
    if (!native)
      note_not_run(
          "flash-bf16's native (vdpbf16ps) outputs equal to the widened ones: needs "
          "avx512-bf16");
    if (kern->name == "flash-bf16@" + sdpa::find_kernel("flash")->isa && native) {
      const Outputs twin = run(*native, pr, c.threads);
      CHECK_MESSAGE(same_bits(got.out, twin.out), "native and widened outputs differ");
      CHECK_MESSAGE(same_bits(got.lse, twin.lse), "native and widened lse differ");
    }
  }
}

}  // namespace

TEST_CASE("the registry has bf16 entries, the native one where the CPU runs it") {
  const auto first = std::find_if(sdpa::kernel_registry().begin(), sdpa::kernel_registry().end(),
                                  [](const sdpa::Kernel& k) { return k.precision == "bf16"; });
  REQUIRE(first != sdpa::kernel_registry().end());
  CHECK(first->name == "flash-bf16");
  for (const auto& t : sdpa::simd_targets())
    if (t.isa != "scalar")
      CHECK_MESSAGE(sdpa::find_kernel("flash-bf16@" + t.isa) != nullptr, t.isa);
  const bool native = sdpa::detail::bf16_native_available();
  CHECK((sdpa::find_kernel("flash-bf16@avx512-bf16") != nullptr) == native);
  if (native) CHECK(sdpa::find_kernel("flash-bf16")->isa == "avx512-bf16");
  for (const auto& k : sdpa::kernel_registry())
    CHECK_MESSAGE((k.precision == "fp32" || k.precision == "bf16" || k.precision == "kv-fp16" ||
                   k.precision == "kv-bf16" || k.precision == "kv-int8" ||
                   k.precision == "kv-q8_0" || k.precision == "kv-q4_0"),
                  k.name);
}

namespace {

// bf16 rounding from its definition, sharing no code with kernels/bf16.hpp: the nearest value of
// 8 significant bits, a tie to the one whose last bit is 0; from half a step past the largest
// bf16 (2^128 - 2^120) on, infinity; a subnormal input, zero of its sign (vcvtneps2bf16 reads
// them as zero); a NaN stays a NaN. In double, where every step below is exact.
float bf16_model(float x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  if (std::fpclassify(x) == FP_SUBNORMAL) return std::copysign(0.0f, x);
  const double a = std::fabs(double(x)), step = std::ldexp(1.0, std::ilogb(a) - 7);
  const double below = std::floor(a / step) * step, above = below + step;
  const double r = a - below < above - a               ? below
                   : a - below > above - a             ? above
                   : std::fmod(below / step, 2.0) == 0 ? below
                                                       : above;
  return r >= 0x1p128 ? std::copysign(INFINITY, x) : float(std::copysign(r, double(x)));
}

// Every sign and exponent (subnormals, infinities and NaNs included), with the kept significand
// bits even and odd, and the dropped bits at, around and away from the tie; a multiple of 16.
std::vector<float> bf16_patterns() {
  std::mt19937 rng(5);
  std::vector<float> x;
  constexpr std::uint32_t kRandom = 0x10000u;
  for (std::uint32_t top = 0; top < 512; ++top)
    for (std::uint32_t kept : {0x00u, 0x01u, 0x7eu, 0x7fu, kRandom})
      for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, kRandom}) {
        const std::uint32_t k = kept == kRandom ? rng() & 0x7fu : kept;
        const std::uint32_t l = low == kRandom ? rng() & 0xffffu : low;
        x.push_back(std::bit_cast<float>((top << 23) | (k << 16) | l));
      }
  return x;
}

bool same_value(float got, float want) {
  return (std::isnan(got) && std::isnan(want)) || got == want;
}

}  // namespace

TEST_CASE("bf16 rounding is the definition's at every sign and exponent") {
  std::int64_t bad = 0;
  for (const float x : bf16_patterns()) {
    const std::uint32_t ours = sdpa::detail::bf16_round_bits(x);
    const float want = bf16_model(x);
    // The bits, so a zero's sign counts; a NaN only as a NaN.
    const bool ok = std::isnan(want) ? std::isnan(std::bit_cast<float>(ours))
                                     : ours == std::bit_cast<std::uint32_t>(want);
    if (!ok && bad++ < 5)
      MESSAGE(std::hex, "x bits ", std::bit_cast<std::uint32_t>(x), ": bf16_round_bits ", ours,
              ", the definition's ", std::bit_cast<std::uint32_t>(want));
  }
  CHECK(bad == 0);
}

TEST_CASE("every bf16 kernel rounds V as the definition does, at every sign and exponent") {
  // One query, one key, q = k = 0: the weight is 1, so the output is V rounded to bf16 (a
  // zero's sign aside: 0 + 1 x -0 is +0). Each vectorised rounding and its scalar tail (d_v - 3:
  // not whole vectors) run on the same patterns.
  const std::vector<float> v = bf16_patterns();
  for (const sdpa::Kernel& kern : kernels_under_test()) {
    if (kern.precision != "bf16" && kern.precision != "kv-bf16") continue;
    for (const std::int64_t d_v : {std::int64_t(v.size()), std::int64_t(v.size()) - 3}) {
      INFO(kern.name, " d_v=", d_v);
      const Shape s{.batch_heads = 1, .n_q = 1, .n_kv = 1, .d_k = 2, .d_v = d_v};
      const std::vector<float> zeros(2, 0.0f);
      std::vector<float> out(std::size_t(d_v), -1.0f);
      kern.forward(
          {.shape = s, .q = zeros.data(), .k = zeros.data(), .v = v.data(), .out = out.data()});
      std::int64_t bad = 0;
      for (std::int64_t c = 0; c < d_v; ++c)
        if (!same_value(out[std::size_t(c)], bf16_model(v[std::size_t(c)])) && bad++ < 5)
          MESSAGE(std::hex, "v bits ", std::bit_cast<std::uint32_t>(v[std::size_t(c)]), ": out ",
                  std::bit_cast<std::uint32_t>(out[std::size_t(c)]), ", the definition's ",
                  std::bit_cast<std::uint32_t>(bf16_model(v[std::size_t(c)])));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("bf16 rounding is the CPU's vcvtneps2bf16" *
          run_if(sdpa::detail::bf16_native_available(),
                 "bf16 rounding against vcvtneps2bf16: needs avx512-bf16")) {
  const std::vector<float> x = bf16_patterns();
  std::vector<std::uint16_t> native(x.size());
  sdpa::detail::bf16_round_native(x.data(), native.data(), std::int64_t(x.size()));
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto ours = std::uint16_t(sdpa::detail::bf16_round_bits(x[i]) >> 16);
    if (ours != native[i] && bad++ < 5)
      MESSAGE(std::hex, "x bits ", std::bit_cast<std::uint32_t>(x[i]), ": ours ", ours,
              ", the CPU's ", native[i]);
  }
  CHECK(bad == 0);
}

TEST_CASE("bf16 kernels are within bf16's bound on small and odd sizes") {
  // d_k odd (a zero pads the last pair), d_v not a multiple of any vector, d_k != d_v.
  const std::int64_t dims[][2] = {{1, 8}, {8, 1}, {64, 64}, {81, 17}, {128, 96}, {7, 33}};
  std::uint32_t seed = 10;
  for (std::int64_t n : {1, 3, 17, 63, 129})
    for (const auto& d : dims)
      for (bool causal : {false, true})
        check_case({.shape = {.batch_heads = 2, .n_q = n, .n_kv = n, .d_k = d[0], .d_v = d[1]},
                    .causal = causal,
                    .seed = seed++});
}

TEST_CASE("bf16 kernels are within bf16's bound when n_q != n_kv, over several key tiles") {
  // With causal and n_q > n_kv, the first n_q - n_kv rows see no key at all; odd n_kv leaves a
  // key without its pair in the last tile.
  const std::int64_t sizes[][2] = {{1, kLarge}, {kLarge, 1}, {17, 301}, {65, 17}, {127, 257}};
  std::uint32_t seed = 100;
  for (const auto& n : sizes)
    for (bool causal : {false, true})
      check_case({.shape = {.batch_heads = 3, .n_q = n[0], .n_kv = n[1], .d_k = 64, .d_v = 40},
                  .causal = causal,
                  .seed = seed++});
}

TEST_CASE("bf16 kernels are within bf16's bound at n = 1000 on two threads, and unscaled") {
  check_case({.shape = {.n_q = kLarge, .n_kv = kLarge, .d_k = 128, .d_v = 128},
              .seed = 200,
              .threads = 2});
  check_case({.shape = {.n_q = kLarge, .n_kv = kLarge, .d_k = 80, .d_v = 48},
              .causal = true,
              .seed = 201,
              .threads = 2});
  // Unscaled at d_k = 16: scores of std 4, still resolved by bf16 (the bound's condition).
  check_case({.shape = {.batch_heads = 2, .n_q = 127, .n_kv = 127, .d_k = 16, .d_v = 16},
              .scale = 1,
              .seed = 300});
}

namespace {

// ---- K/V stored in 16 bits (precision "kv-fp16", "kv-bf16"; kernels/flash_kv.cpp). Only K
// and V are rounded (each element <= u of its format: 2^-11 for fp16, 2^-8 for bf16, or below
// the format's normals by half its subnormal spacing: catalogue::rounding_of), so in the bound
// above a product q_c k_jc moves by at most u and a p_j v_jc by at most u, the rest is fp32 as
// in flash. And since widening a stored element to fp32 is exact, the kernel must
// give flash's bits (on the same instruction set) for K and V rounded to the format.

std::vector<const sdpa::Kernel*> kv_kernels() {
  std::vector<const sdpa::Kernel*> out;
  for (const sdpa::Kernel& k : kernels_under_test())
    // flash's K/V formats; the ggml peer's (test_ggml.cpp) round elsewhere too.
    if ((k.precision == "kv-fp16" || k.precision == "kv-bf16") && k.family != "ggml")
      out.push_back(&k);
  return out;
}

float round_to(const sdpa::Kernel& kern, float x) {
  using namespace sdpa::detail;
  return kern.precision == "kv-fp16" ? f16_to_f32(f16_bits(x)) : bf16_to_f32(bf16_bits(x));
}

void check_kv_case(const Case& c) {
  const Shape& s = c.shape;
  for (const auto* kern : kv_kernels()) {
    INFO(kern->name, " on ", describe(c), " group=", s.group);
    const Problem pr = make_problem(c, *catalogue::rounding_of(kern->precision));
    const Outputs got = run(*kern, pr, 1);
    check_bound(got, pr);
    // flash's bits on the rounded K and V, and the same bits on 2 and 3 threads, with a stored
    // cache (as the timing kind passes it) and with probes.
    std::vector<float> k(pr.k), v(pr.v);
    for (auto* x : {&k, &v})
      for (float& e : *x) e = round_to(*kern, e);
    const sdpa::Kernel* flash = sdpa::find_kernel("flash@" + kern->isa);
    REQUIRE(flash != nullptr);
    const Outputs want = run(*flash, pr, 1, nullptr, k.data(), v.data());
    CHECK_MESSAGE(same_bits(got.out, want.out), "output differs from flash on rounded K, V");
    CHECK_MESSAGE(same_bits(got.lse, want.lse), "lse differs from flash on rounded K, V");
    sdpa::ForwardArgs args{.shape = s, .q = pr.q.data(), .k = pr.k.data(), .v = pr.v.data()};
    args.scale = pr.scale;
    args.mask.causal = c.causal;
    const auto stored = kern->store_kv(args);
    for (int threads : {2, 3}) {
      Outputs o{std::vector<float>(s.out_elements()), std::vector<float>(s.rows())};
      sdpa::RowProbes probes(s.rows());
      args.out = o.out.data();
      args.lse = o.lse.data();
      args.threads = threads;
      args.probes = &probes;
      args.stored_kv = stored.get();
      kern->forward(args);
      CHECK_MESSAGE(same_bits(o.out, got.out), threads, " threads, stored K/V, probes");
      CHECK_MESSAGE(same_bits(o.lse, got.lse), threads, " threads, stored K/V, probes");
    }
  }
}

// The K/V storage kernels' cases: decode shapes (n_q <= 16 per head: the decode path) and
// prefill, one key, n_kv not a multiple of the lanes, of a key block (16), of the decode tile
// (256) or of a split, d_k != d_v, odd and not a multiple of 4, causal with n_q < n_kv,
// heads_kv = 1 and = heads_q, grouped; seeds from `seed` on.
template <class Check>
void for_each_storage_case(std::uint32_t seed, Check check) {
  struct Dims {
    std::int64_t heads, group, n_q, n_kv, d_k, d_v;
  };
  const Dims dims[] = {{2, 1, 1, 1, 8, 8},        {4, 4, 1, 37, 17, 9},  {6, 2, 3, 300, 64, 40},
                       {8, 4, 4, 1100, 128, 128}, {3, 3, 5, 513, 7, 33}, {2, 1, 1, 257, 96, 80},
                       {4, 2, 20, 70, 24, 16},    {1, 1, 65, 65, 33, 31}};
  for (const auto& d : dims)
    for (bool causal : {false, true})
      check({.shape = {.batch_heads = d.heads,
                       .n_q = d.n_q,
                       .n_kv = d.n_kv,
                       .d_k = d.d_k,
                       .d_v = d.d_v,
                       .group = d.group},
             .causal = causal,
             .seed = seed++});
}

}  // namespace

TEST_CASE("the fp16 conversions round to nearest even and widen exactly") {
  using namespace sdpa::detail;
  // Every binary16 value widens and rounds back to itself (NaN to a NaN); the midpoints between
  // neighbours round to the even one; and, where the CPU has F16C, the kernels' widening
  // agrees with f16_to_f32 (a cell stored and read back through flash-kv-f16 checks that).
  std::int64_t bad = 0;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float x = f16_to_f32(std::uint16_t(h));
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
    if (nan ? !std::isnan(x) : f16_bits(x) != h) ++bad;
    if ((h & 0x7fffu) >= 0x7bffu) continue;  // no finite neighbour above
    const float next = f16_to_f32(std::uint16_t(h + 1));
    const float mid = float((double(x) + double(next)) / 2);  // exact in fp32
    if (f16_bits(mid) != ((h & 1u) ? h + 1 : h)) ++bad;
    if (f16_bits(std::nextafter(mid, next)) != h + 1) ++bad;
  }
  CHECK(bad == 0);
  CHECK(f16_bits(65520.0f) == 0x7c00u);  // past the largest finite: infinity
  CHECK(f16_bits(65519.99f) == 0x7bffu);
  CHECK(f16_bits(0x1p-25f) == 0);  // a tie with zero rounds to even
  CHECK(f16_bits(-1e-30f) == 0x8000u);
  CHECK(std::isinf(f16_to_f32(0x7c00u)));
}

// The kernels widen fp16 K and V in registers, by an instruction where the target has one and
// bit by bit where not (WideLoad): every binary16 value, on every target, must give
// f16_to_f32's fp32 value (NaN a NaN: vcvtph2ps quiets a signalling one).
TEST_CASE("every binary16 value widens exactly on every target") {
  std::vector<std::uint16_t> all(0x10000u);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = std::uint16_t(h);
  // An odd count, so each target's scalar tail runs too.
  const std::int64_t n = std::int64_t(all.size()) - 3;
  const auto widenings = sdpa::detail::f16_widenings();
  CHECK(!widenings.empty());
  for (const auto& [isa, widen] : widenings) {
    CAPTURE(isa);
    std::vector<float> got(all.size(), -1.0f);
    widen(all.data(), got.data(), n);
    std::int64_t wrong = 0;
    for (std::int64_t h = 0; h < n; ++h) {
      const float want = sdpa::detail::f16_to_f32(all[std::size_t(h)]);
      const float x = got[std::size_t(h)];
      if (std::isnan(want) ? !std::isnan(x)
                           : std::bit_cast<std::uint32_t>(x) != std::bit_cast<std::uint32_t>(want))
        ++wrong;
    }
    CHECK(wrong == 0);
    CHECK(got[std::size_t(n)] == -1.0f);  // nothing past n written
  }
}

TEST_CASE("the registry has K/V storage entries on every target, with their bytes") {
  for (const char* family : {"flash-kv-f16", "flash-kv-bf16"}) {
    const sdpa::Kernel* best = sdpa::find_kernel(family);
    REQUIRE(best != nullptr);
    CHECK(best->isa == sdpa::find_kernel("flash")->isa);
    CHECK(bool(best->store_kv));
    CHECK(best->kv_element_bytes == 2);
    const Shape s{.batch_heads = 4, .n_q = 1, .n_kv = 100, .d_k = 8, .d_v = 8, .group = 2};
    CHECK(best->bytes(s, {}) == 4.0 * (4 * 8 + 4 * 8) + 2.0 * (2 * 100 * 16));
  }
  for (const auto& t : sdpa::simd_targets())
    if (t.isa != "scalar") CHECK_MESSAGE(sdpa::find_kernel("flash-kv-f16@" + t.isa), t.isa);
}

TEST_CASE("K/V storage kernels are within their format's bound and are flash on rounded K, V") {
  for_each_storage_case(500, check_kv_case);
}

TEST_CASE(
    "flash-kv-f16 with K and V below fp16's normals: within the bound, by its underflow term") {
  // A window of 1 on a prefill shape: each row's output is its own V row rounded to fp16. With
  // K and V ~ N(0, 2^-32) most elements are fp16 subnormals, off by up to 2^-25 rather than
  // 2^-11 of themselves, so the kernel must be within the bound and outside the bound that
  // lacks the underflow term (catalogue::Rounding), else the term is not what is tested.
  const Case c{.shape = {.batch_heads = 2, .n_q = 40, .n_kv = 40, .d_k = 16, .d_v = 8},
               .causal = true,
               .window_left = 0,
               .seed = 39};
  const Shape& s = c.shape;
  catalogue::Inputs in = catalogue::random_inputs(s, 1, c.seed);
  for (auto* x : {&in.k, &in.v})
    for (float& e : *x) e *= 0x1p-16f;
  const Rounding fp16 = *catalogue::rounding_of("kv-fp16");
  Rounding relative_only = fp16;
  relative_only.tiny = 0;
  const catalogue::Expected w = catalogue::expected(c, in, fp16);
  const catalogue::Expected narrow = catalogue::expected(c, in, relative_only);
  std::int64_t runs = 0;
  for (const auto* kern : kv_kernels()) {
    if (kern->precision != "kv-fp16") continue;
    INFO(kern->name);
    ++runs;
    Outputs got{std::vector<float>(s.out_elements()), std::vector<float>(s.rows())};
    kern->forward({.shape = s,
                   .q = in.q.data(),
                   .k = in.k.data(),
                   .v = in.v.data(),
                   .out = got.out.data(),
                   .lse = got.lse.data(),
                   .scale = c.scale_value(),
                   .mask = c.mask(),
                   .threads = 2});
    std::int64_t bad = 0, beyond_narrow = 0;
    for (std::int64_t x = 0; x < s.out_elements(); ++x) {
      const double err = std::abs(double(got.out[x]) - w.out[x]);
      bad += !(err <= w.out_tol[x]);
      beyond_narrow += err > narrow.out_tol[x];
    }
    for (std::int64_t r = 0; r < s.rows(); ++r)
      bad += !(std::abs(double(got.lse[r]) - w.lse[r]) <= w.lse_tol[r]);
    CHECK_MESSAGE(bad == 0, bad, " outputs or lse outside the bound");
    CHECK_MESSAGE(beyond_narrow > 0, "no output needs the underflow term");
  }
  CHECK(runs > 0);
}

TEST_CASE("a stored K/V of another format or shape is refused") {
  const sdpa::Kernel* f16 = sdpa::find_kernel("flash-kv-f16");
  const sdpa::Kernel* bf16 = sdpa::find_kernel("flash-kv-bf16");
  const Shape s{.batch_heads = 2, .n_q = 1, .n_kv = 5, .d_k = 4, .d_v = 4};
  std::vector<float> x(40, 0.5f), out(8), lse(2);
  sdpa::ForwardArgs a{.shape = s, .q = x.data(), .k = x.data(), .v = x.data(), .out = out.data()};
  const auto stored = bf16->store_kv(a);
  a.stored_kv = stored.get();
  CHECK_THROWS_AS(f16->forward(a), std::invalid_argument);
  sdpa::ForwardArgs shorter = a;
  shorter.shape.n_kv = 4;
  CHECK_THROWS_AS(bf16->forward(shorter), std::invalid_argument);
  CHECK_NOTHROW(bf16->forward(a));
}

namespace {

// ---- K and V stored as int8 with a scale per row (precision "kv-int8";
// kernels/flash_kv_int8.cpp), Q rounded per row at the call. Two bounds per case:
//  - against fp64 of the rounded inputs (int8_inputs) only fp32 arithmetic is left: make_problem's
//    bound with rounding {0, 0} (the decode path's integer dot products are exact, so its scores
//    are closer still);
//  - against fp64 of the fp32 inputs, the quantisation step. A row x of scale sigma = max|x| / 127
//    moves each element by at most e_x = sigma (1/2 + 2^-14) (catalogue::Rounding's row_step, to
//    first order in the catalogue's bound, exactly here). Per query row (c the scale, q the row,
//    eq the e of the row of c q, ek_j and ev_j those of key and value j),
//      |s^_j - s_j| <= Q_j = ek_j |c q|_1 + eq (|k_j|_1 + d_k ek_j)
//    and fp32 adds to a score at most u32 ((d_k + 2)(A_j + Q_j) + (m - s_j) + R + 4) (as above);
//    e_j is their sum and D = max_j e_j over the visible keys. Scores moved by at most D move each
//    weight by a factor within e^(+-2D), exactly (not to first order), so |p^_j - p_j| <=
//    (e^(2D) - 1) p_j and, since the weights' changes sum to 0,
//      |o^_c - o_c| <= (e^(2D) - 1) sum_j p_j (|v_jc - o_c| + ev_j)    weights
//                    + sum_j p_j ev_j                                  values
//                    + e^(2D) (2 n + 8) u32 sum_j p_j (|v_jc| + ev_j)    fp32's P V
//      |lse^ - lse| <= D + u32 (n + 4 + |lse|).
//    No safety factor: the quantisation terms are worst cases.

double row_error(const float* x, std::int64_t n, double scale = 1) {
  double m = 0;
  for (std::int64_t c = 0; c < n; ++c) m = std::max(m, std::abs(scale * x[c]));
  return m * catalogue::rounding_of("kv-int8")->row_step;
}

double l1(const float* x, std::int64_t n, double scale = 1) {
  double sum = 0;
  for (std::int64_t c = 0; c < n; ++c) sum += std::abs(scale * x[c]);
  return sum;
}

// fp64 of pr's fp32 inputs and the quantisation bound (above) around it.
struct Int8Bound {
  sdpa::ReferenceResult ref;
  std::vector<double> out_tol, lse_tol;
};

Int8Bound int8_bound(const Problem& pr) {
  const Shape& s = pr.c.shape;
  const double c = pr.scale;
  Int8Bound bound{sdpa::reference_attention(s, std::vector<double>(pr.q.begin(), pr.q.end()),
                                            std::vector<double>(pr.k.begin(), pr.k.end()),
                                            std::vector<double>(pr.v.begin(), pr.v.end()), c,
                                            sdpa::Mask{.causal = pr.c.causal}),
                  std::vector<double>(s.out_elements(), 0), std::vector<double>(s.rows(), 0)};
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = s.kv_head(r / s.n_q);
    const std::int64_t n = sdpa::Mask{.causal = pr.c.causal}.visible(s, r % s.n_q).end;
    if (n == 0) continue;  // fully masked: exact zeros expected
    const float* q = pr.q.data() + r * s.d_k;
    const float* k = pr.k.data() + b * s.n_kv * s.d_k;
    const float* v = pr.v.data() + b * s.n_kv * s.d_v;
    const RowScores row = row_scores(q, k, s.d_k, n, c);
    const double eq = row_error(q, s.d_k, c), q1 = l1(q, s.d_k, c);
    double d = 0;
    std::vector<double> ev(n);
    for (std::int64_t j = 0; j < n; ++j) {
      const double ek = row_error(k + j * s.d_k, s.d_k);
      const double qj = ek * q1 + eq * (l1(k + j * s.d_k, s.d_k) + double(s.d_k) * ek);
      const double fp32 =
          kU32 * ((s.d_k + 2) * (row.a[j] + qj) + (row.m - row.s[j]) + row.range + 4);
      d = std::max(d, qj + fp32);
      ev[j] = row_error(v + j * s.d_v, s.d_v);
    }
    const double grow = std::exp(2 * d), nn = double(n);
    for (std::int64_t x = 0; x < s.d_v; ++x) {
      const double o = bound.ref.out[r * s.d_v + x];
      double spread = 0, moved = 0, mass = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double vj = v[j * s.d_v + x], p = row.p[j];
        spread += p * (std::abs(vj - o) + ev[j]);
        moved += p * ev[j];
        mass += p * (std::abs(vj) + ev[j]);
      }
      bound.out_tol[r * s.d_v + x] =
          (grow - 1) * spread + moved + grow * (2 * nn + 8) * kU32 * mass;
    }
    bound.lse_tol[r] = d + kU32 * (nn + 4 + std::abs(bound.ref.lse[r]));
  }
  return bound;
}

// Every output and lse of `got` within the quantisation bound.
void check_int8_bound(const Outputs& got, const Problem& pr, const Int8Bound& bound) {
  INFO("the quantisation bound around fp64 of the fp32 inputs");
  Problem around = pr;
  around.out = bound.ref.out, around.lse = bound.ref.lse;
  around.out_tol = bound.out_tol, around.lse_tol = bound.lse_tol;
  check_bound(got, around);
}

std::vector<const sdpa::Kernel*> int8_kernels() {
  std::vector<const sdpa::Kernel*> out;
  for (const sdpa::Kernel& k : kernels_under_test())
    if (k.precision == "kv-int8") out.push_back(&k);
  return out;
}

// The Highway target an int8 entry runs its fp32 steps on (the vpdpbusd and sdot entries:
// their vectors' width).
std::string fp32_isa(const sdpa::Kernel& k) {
  if (k.isa == "avx512-vnni") return "avx512";
  if (k.isa == "avx-vnni") return "avx2";
  if (k.isa == "neon-dotprod") return "neon";
  return k.isa;
}

Outputs run_args(const sdpa::Kernel& kern, sdpa::ForwardArgs args) {
  const Shape& s = args.shape;
  Outputs o{std::vector<float>(s.out_elements(), NAN), std::vector<float>(s.rows(), NAN)};
  args.out = o.out.data();
  args.lse = o.lse.data();
  kern.forward(args);
  return o;
}

void check_int8_case(const Case& c) {
  const Shape& s = c.shape;
  const auto kernels = int8_kernels();
  REQUIRE(!kernels.empty());
  const Problem pr = make_problem(c, {.product = 0, .value = 0}, true);
  const RoundedInputs in = int8_inputs(s, pr.q, pr.k, pr.v, pr.scale);
  const Int8Bound bound = int8_bound(pr);
  for (const auto* kern : kernels) {
    INFO(kern->name, " on ", describe(c), " group=", s.group);
    sdpa::ForwardArgs args{.shape = s, .q = pr.q.data(), .k = pr.k.data(), .v = pr.v.data()};
    args.scale = pr.scale;
    args.mask.causal = c.causal;
    const Outputs got = run_args(*kern, args);
    check_bound(got, pr);
    check_int8_bound(got, pr, bound);
    // Off the decode path: flash's tiles on the rounded inputs, so flash's bits.
    if (!sdpa::detail::is_decode_shape(s)) {
      sdpa::ForwardArgs rounded = args;
      rounded.q = in.q.data(), rounded.k = in.k.data(), rounded.v = in.v.data();
      const Outputs want = run_args(*sdpa::find_kernel("flash@" + fp32_isa(*kern)), rounded);
      CHECK_MESSAGE(same_bits(got.out, want.out), "output differs from flash on rounded inputs");
      CHECK_MESSAGE(same_bits(got.lse, want.lse), "lse differs from flash on rounded inputs");
    }
    // The same bits on 2 and 3 threads, with a stored cache and probes.
    const auto stored = kern->store_kv(args);
    for (int threads : {2, 3}) {
      sdpa::RowProbes probes(s.rows());
      sdpa::ForwardArgs more = args;
      more.threads = threads;
      more.probes = &probes;
      more.stored_kv = stored.get();
      const Outputs o = run_args(*kern, more);
      CHECK_MESSAGE(same_bits(o.out, got.out), threads, " threads, stored K/V, probes");
      CHECK_MESSAGE(same_bits(o.lse, got.lse), threads, " threads, stored K/V, probes");
    }
    // The dots are exact integer sums: on one Highway target, one result (vpdpbusd in zmm
    // against AVX512BW's vpmaddubsw, in ymm against AVX2's vpmaddubsw, sdot against NEON's
    // portable dots).
    using sdpa::detail::Int8Dots;
    if (!sdpa::detail::int8_dots_available(Int8Dots::avx512_vnni))
      note_not_run(
          "flash-kv-int8@avx512-vnni's outputs equal to flash-kv-int8@avx512's: needs "
          "avx512-vnni");
    if (!sdpa::detail::int8_dots_available(Int8Dots::avx_vnni))
      note_not_run(
          "flash-kv-int8@avx-vnni's outputs equal to flash-kv-int8@avx2's: needs avx-vnni");
    if (!sdpa::detail::int8_dots_available(Int8Dots::neon_dotprod))
      note_not_run(
          "flash-kv-int8@neon-dotprod's outputs equal to flash-kv-int8@neon's: needs "
          "neon-dotprod (sdot)");
    if (fp32_isa(*kern) != kern->isa) {
      const Outputs twin = run_args(*sdpa::find_kernel("flash-kv-int8@" + fp32_isa(*kern)), args);
      CHECK_MESSAGE(same_bits(twin.out, got.out), "outputs differ from the same target's twin");
      CHECK_MESSAGE(same_bits(twin.lse, got.lse), "lse differs from the same target's twin");
    }
  }
}

}  // namespace

TEST_CASE("int8 rows: scale max|x| / 127, ints within 127, a zero row scale 0, NaN rows NaN") {
  using sdpa::detail::quantise_row;
  std::int8_t y[5];
  const float x[5] = {-2.54f, 1.0f, 0.0f, 2.54f, 0.01f};
  CHECK(quantise_row(x, 5, y) == 2.54f / 127);
  CHECK((y[0] == -127 && y[1] == 50 && y[2] == 0 && y[3] == 127 && y[4] == 0));
  const float zero[3] = {0.0f, -0.0f, 0.0f};
  CHECK(quantise_row(zero, 3, y) == 0.0f);
  CHECK((y[0] == 0 && y[1] == 0 && y[2] == 0));
  const float bad[2] = {1.0f, INFINITY};
  CHECK(std::isnan(quantise_row(bad, 2, y)));
}

TEST_CASE("int8 rows: the library's quantiser is the definition's on random and adversarial rows") {
  std::vector<std::vector<float>> rows = {
      {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f, 125.5f},  // ties, scale 1
      {-127, 0.5f, -125.5f, 64.5f, 63.5f},
      {0, -0.0f, 0},                                        // zeros
      {-3, 3, 1, -1, 0},                                    // both signs of the max
      {-5, 2},                                              // the max negative only
      {7},                                                  // one element
      {FLT_MAX, -FLT_MAX, 1, FLT_MAX / 254},                // the largest
      {1, 0x1p-149f, -0x1p-140f, 0x1p-126f},                // subnormals under a normal max
      {127 * 0x1p-149f, 63.5f * 0x1p-149f, -0x1p-149f, 0},  // subnormal max: scale 2^-149
      {0x1p-149f, -0x1p-149f, 0},                           // the smallest subnormal
      {3e-38f, -1e-38f, 1.5e-38f},  // tiny normals: 127 / max|x| past fp32's range
      {1, INFINITY},                // not finite: scale NaN
      {NAN, 1},
  };
  // Ties at other scales: a power of two times the first row is still exactly on its ties.
  for (float p : {0x1p-20f, 0x1p-120f, 0x1p20f, 0x1p100f}) {
    const std::vector<float> ties = rows[0];
    rows.push_back(ties);
    for (float& x : rows.back()) x *= p;
  }
  std::mt19937 rng(17);
  for (std::int64_t d : {1, 2, 3, 16, 64, 127, 256})
    for (float magnitude : {1e-30f, 1e-3f, 1.0f, 1e3f, 1e30f})
      for (int i = 0; i < 20; ++i) {
        std::vector<float> row = normals(d, rng);
        for (float& x : row) x *= magnitude;
        rows.push_back(row);
      }
  std::int64_t near_ties = 0, differ_at_near_ties = 0;
  std::vector<std::int8_t> got;
  for (const auto& row : rows) {
    const std::int64_t d = std::int64_t(row.size());
    got.assign(row.size(), 99);
    const float scale = sdpa::detail::quantise_row(row.data(), d, got.data());
    const Int8Row want = int8_oracle(row.data(), d);
    std::string shown;
    for (float x : row) shown += std::to_string(x) + " ";
    INFO("row ", shown);
    CHECK((scale == want.scale || (std::isnan(scale) && std::isnan(want.scale))));
    for (std::int64_t c = 0; c < d; ++c) {
      const int g = got[std::size_t(c)], w = want.ints[std::size_t(c)];
      const bool near =
          std::find(want.near_ties.begin(), want.near_ties.end(), c) != want.near_ties.end();
      near_ties += near;
      if (near && std::abs(g - w) == 1) {
        ++differ_at_near_ties;
        continue;
      }
      CHECK_MESSAGE(g == w, "element ", c, ": ", row[std::size_t(c)], " quantised to ", g,
                    ", the definition's ", w);
    }
  }
  // Near a tie fp32's 127 / max|x| may round either way; the kernel tests' inputs avoid them.
  MESSAGE(rows.size(), " rows; ", near_ties, " elements within 2^-12 of a tie, ",
          differ_at_near_ties, " of them rounded the other way");
}

TEST_CASE("the int8 K/V kernel: registry entries and bytes") {
  const sdpa::Kernel* best = sdpa::find_kernel("flash-kv-int8");
  REQUIRE(best != nullptr);
  CHECK(best->precision == "kv-int8");
  CHECK(bool(best->store_kv));
  // The best is the widest native dots this CPU runs, on their Highway target.
  using sdpa::detail::Int8Dots;
  const auto has = [](Int8Dots dots, const char* target) {
    return sdpa::detail::int8_dots_available(dots) &&
           sdpa::find_kernel(std::string("flash@") + target) != nullptr;
  };
  const std::string want = has(Int8Dots::avx512_vnni, "avx512")  ? "avx512-vnni"
                           : has(Int8Dots::avx512, "avx512")     ? "avx512"
                           : has(Int8Dots::avx_vnni, "avx2")     ? "avx-vnni"
                           : has(Int8Dots::avx2, "avx2")         ? "avx2"
                           : has(Int8Dots::sse4, "sse4")         ? "sse4"
                           : has(Int8Dots::neon_dotprod, "neon") ? "neon-dotprod"
                                                                 : sdpa::find_kernel("flash")->isa;
  CHECK(best->isa == want);
  CHECK((sdpa::find_kernel("flash-kv-int8@avx-vnni") != nullptr) ==
        has(Int8Dots::avx_vnni, "avx2"));
  CHECK((sdpa::find_kernel("flash-kv-int8@avx512-vnni") != nullptr) ==
        has(Int8Dots::avx512_vnni, "avx512"));
  CHECK((sdpa::find_kernel("flash-kv-int8@neon-dotprod") != nullptr) ==
        has(Int8Dots::neon_dotprod, "neon"));
  // AVX-512's, AVX2's and SSE4's int8 dots are read against their own roofs, the others' roof is
  // their ISA.
  if (const auto* avx512 = sdpa::find_kernel("flash-kv-int8@avx512")) {
    CHECK(avx512->dot_isa == (has(Int8Dots::avx512, "avx512") ? "avx512-int8" : ""));
    if (has(Int8Dots::avx512, "avx512")) CHECK(sdpa::peak::lanes("avx512-int8") == 64);
  }
  if (const auto* avx2 = sdpa::find_kernel("flash-kv-int8@avx2"))
    CHECK(avx2->dot_isa == (has(Int8Dots::avx2, "avx2") ? "avx2-int8" : ""));
  if (const auto* sse4 = sdpa::find_kernel("flash-kv-int8@sse4")) {
    CHECK(sse4->dot_isa == (has(Int8Dots::sse4, "sse4") ? "sse4-int8" : ""));
    if (has(Int8Dots::sse4, "sse4")) CHECK(sdpa::peak::lanes("sse4-int8") == 16);
  }
  if (const auto* sdot = sdpa::find_kernel("flash-kv-int8@neon-dotprod")) {
    CHECK(sdot->roof_isa() == "neon-dotprod");
    CHECK(sdpa::peak::dot_product_isa("neon-dotprod"));
    CHECK(sdpa::peak::lanes("neon-dotprod") == 16);
  } else {
    note_not_run("flash-kv-int8@neon-dotprod's entry and roof: needs neon-dotprod (sdot)");
  }
  // A byte per element and a 4-byte scale per row of K and of V.
  const Shape s{.batch_heads = 4, .n_q = 1, .n_kv = 100, .d_k = 8, .d_v = 8, .group = 2};
  CHECK(best->bytes(s, {}) == 4.0 * (4 * 8 + 4 * 8) + 1.0 * (2 * 100 * 16) + 4.0 * 2 * (2 * 100));
}

TEST_CASE("the int8 K/V kernel is within its bounds, thread-count and ISA independent") {
  // The 16-bit formats' cases.
  for_each_storage_case(700, check_int8_case);
}

// The scores of every int8 dot product this CPU runs against exact sums, in kv_int8.hpp's K
// layout (the byte of depth c of key t of a block of nb keys at (c / 4 nb + t) 4 + c % 4): rows
// and keys around the passes' and blocks' edges, and the largest products (+-127 x +-127, which
// vpmaddubsw's int16 pairs hold without saturating) besides random ones.
TEST_CASE("int8 dots: every instruction set gives the exact sums, +-127 included, same bits") {
  using sdpa::detail::Int8Dots;
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> any(-127, 127), sign(0, 1);
  std::uniform_real_distribution<float> scales(0.001f, 2.0f);
  // kLargest: every product +127 x +127 (as -127 x -127), kSmallest: every one -127 x 127.
  enum Fill { kRandom, kExtreme, kLargest, kSmallest };
  const std::pair<Int8Dots, const char*> all[] = {{Int8Dots::portable, "portable"},
                                                  {Int8Dots::sse4, "sse4"},
                                                  {Int8Dots::avx2, "avx2"},
                                                  {Int8Dots::avx512, "avx512"},
                                                  {Int8Dots::avx_vnni, "avx-vnni"},
                                                  {Int8Dots::avx512_vnni, "avx512-vnni"},
                                                  {Int8Dots::neon_dotprod, "neon-dotprod"}};
  for (const auto& [dots, name] : all) {
    if (!sdpa::detail::int8_dots_available(dots)) {
      note_not_run(std::string("int8 dots of ") + name + " against exact sums: needs " + name);
      continue;
    }
    const auto scores = sdpa::detail::int8_scores(dots);
    const auto check = [&](std::int64_t rows, std::int64_t d4, std::int64_t nk, Fill fill) {
      CAPTURE(name);
      CAPTURE(rows);
      CAPTURE(d4);
      CAPTURE(nk);
      CAPTURE(int(fill));
      const auto value = [&](bool key) {
        switch (fill) {
          case kRandom:
            return any(rng);
          case kExtreme:
            return sign(rng) ? 127 : -127;
          case kLargest:
            return -127;
          case kSmallest:
            return key ? -127 : 127;
        }
        return 0;
      };
      const std::int64_t ld_q = d4 + 4, ld_s = nk + 3;
      std::vector<std::int8_t> q(std::size_t(rows * ld_q), 99), k(std::size_t(nk * d4));
      std::vector<std::int32_t> kv(std::size_t(nk * d4));  // key j's row, row-major
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t c = 0; c < d4; ++c)
          q[std::size_t(i * ld_q + c)] = std::int8_t(value(false));
      for (std::int64_t j = 0; j < nk; ++j)
        for (std::int64_t c = 0; c < d4; ++c) {
          const std::int64_t j0 = j / 16 * 16, nb = std::min<std::int64_t>(16, nk - j0);
          const int x = value(true);
          kv[std::size_t(j * d4 + c)] = x;
          k[std::size_t(j0 * d4 + (c / 4 * nb + (j - j0)) * 4 + c % 4)] = std::int8_t(x);
        }
      std::vector<float> q_scale(static_cast<std::size_t>(rows));
      std::vector<float> k_scale(static_cast<std::size_t>(nk));
      for (float& x : q_scale) x = scales(rng);
      for (float& x : k_scale) x = scales(rng);
      std::vector<float> got(std::size_t(rows * ld_s), -1.0f);
      scores(q.data(), ld_q, q_scale.data(), rows, k.data(), k_scale.data(), d4, nk, got.data(),
             ld_s);
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < ld_s; ++j) {
          float want = -1.0f;  // past nk: untouched
          if (j < nk) {
            std::int64_t dot = 0;
            for (std::int64_t c = 0; c < d4; ++c)
              dot += std::int64_t(q[std::size_t(i * ld_q + c)]) * kv[std::size_t(j * d4 + c)];
            want = (q_scale[std::size_t(i)] * k_scale[std::size_t(j)]) * float(dot);
          }
          if (std::bit_cast<std::uint32_t>(got[std::size_t(i * ld_s + j)]) !=
              std::bit_cast<std::uint32_t>(want))
            ++wrong;
        }
      CHECK(wrong == 0);
    };
    for (const std::int64_t rows : {1, 3, 4, 5, 8, 9, 16})
      for (const std::int64_t d4 : {4, 8, 12, 20, 128, 132})
        for (const std::int64_t nk : {1, 6, 7, 8, 9, 16, 17, 40})
          for (const Fill fill : {kRandom, kExtreme, kLargest, kSmallest})
            check(rows, d4, nk, fill);
    // The deepest row the format takes (kv_int8.hpp): the largest sums int32 must hold, and
    // vpdpbusd's lanes (k + 128) q wrapping past 2^31 before the bias is taken off.
    for (const std::int64_t nk : {1, 17})
      for (const Fill fill : {kLargest, kSmallest, kExtreme})
        check(2, sdpa::detail::kInt8MaxDepth, nk, fill);
  }
}

// Every int8 entry at +-127 everywhere (inputs +-1: each row rounds to +-127 with scale 1/127,
// so the kernels are fp32-close to fp64 of the inputs), decode and grouped, and each vpdpbusd or
// sdot entry against its Highway target's twin to the bit.
TEST_CASE("the int8 K/V entries at +-127 everywhere: near fp64, the same bits as their twins") {
  std::mt19937 rng(127);
  const auto signs = [&](std::int64_t n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = rng() % 2 ? 1.0f : -1.0f;
    return x;
  };
  const auto wide = [](const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
  };
  for (const Shape s :
       {Shape{.batch_heads = 32, .n_q = 1, .n_kv = 100, .d_k = 128, .d_v = 128, .group = 4},
        Shape{.batch_heads = 8, .n_q = 1, .n_kv = 37, .d_k = 20, .d_v = 12, .group = 8},
        Shape{.batch_heads = 6, .n_q = 3, .n_kv = 17, .d_k = 36, .d_v = 16, .group = 2}}) {
    const auto q = signs(s.q_elements()), k = signs(s.k_elements()), v = signs(s.v_elements());
    const float scale = 1.0f / std::sqrt(float(s.d_k));
    const auto ref =
        sdpa::reference_attention(s, wide(q), wide(k), wide(v), scale, sdpa::Mask{.causal = false});
    for (const auto* kern : int8_kernels()) {
      INFO(kern->name, " bh=", s.batch_heads, " n_q=", s.n_q, " n_kv=", s.n_kv, " d_k=", s.d_k);
      sdpa::ForwardArgs args{.shape = s, .q = q.data(), .k = k.data(), .v = v.data()};
      args.scale = scale;
      const Outputs got = run_args(*kern, args);
      double worst = 0;
      for (std::size_t i = 0; i < got.out.size(); ++i)
        worst = std::max(worst, std::abs(got.out[i] - ref.out[i]));
      for (std::size_t i = 0; i < got.lse.size(); ++i)
        worst = std::max(worst, std::abs(got.lse[i] - ref.lse[i]));
      CHECK(worst < 1e-4);  // NaN fails too
      if (fp32_isa(*kern) != kern->isa) {
        const auto* twin = sdpa::find_kernel("flash-kv-int8@" + fp32_isa(*kern));
        REQUIRE(twin != nullptr);
        const Outputs want = run_args(*twin, args);
        CHECK(same_bits(got.out, want.out));
        CHECK(same_bits(got.lse, want.lse));
      }
    }
  }
}

TEST_CASE("a stored int8 K/V of another format or shape is refused") {
  const sdpa::Kernel* int8 = sdpa::find_kernel("flash-kv-int8");
  const Shape s{.batch_heads = 2, .n_q = 1, .n_kv = 5, .d_k = 4, .d_v = 4};
  std::vector<float> x(40, 0.5f), out(8);
  sdpa::ForwardArgs a{.shape = s, .q = x.data(), .k = x.data(), .v = x.data(), .out = out.data()};
  const auto f16 = sdpa::find_kernel("flash-kv-f16")->store_kv(a);
  a.stored_kv = f16.get();
  CHECK_THROWS_AS(int8->forward(a), std::invalid_argument);
  const auto stored = int8->store_kv(a);
  a.stored_kv = stored.get();
  sdpa::ForwardArgs shorter = a;
  shorter.shape.n_kv = 4;
  CHECK_THROWS_AS(int8->forward(shorter), std::invalid_argument);
  CHECK_NOTHROW(int8->forward(a));
}

// Past kInt8MaxDepth bytes of K row the int32 sums could overflow (kv_int8.hpp): every int8
// entry refuses such a decode shape, by its refusal and by forward, rather than wrap its sums.
TEST_CASE("every int8 entry refuses a decode shape too deep for exact int32 sums") {
  const std::int64_t deepest = sdpa::detail::kInt8MaxDepth;
  const Shape ok{.batch_heads = 1, .n_q = 1, .n_kv = 3, .d_k = deepest, .d_v = 4};
  Shape deep = ok;
  deep.d_k = deepest + 1;
  std::vector<float> q(std::size_t(deep.d_k), 0.25f), k(3 * q.size(), -0.5f), v(12, 1.0f), out(4);
  int entries = 0;
  for (const sdpa::Kernel& kern : sdpa::kernel_registry()) {
    if (kern.family != "flash-kv-int8") continue;
    CAPTURE(kern.name);
    ++entries;
    CHECK(kern.refusal(ok, {}, {}).empty());
    CHECK(kern.refusal(deep, {}, {}) ==
          "d_k 132105 is above 132104, where the int8 scores' int32 sums could overflow");
    CHECK(kern.refusal({.batch_heads = 1, .n_q = 64, .n_kv = 64, .d_k = deep.d_k, .d_v = 4}, {}, {})
              .empty());  // prefill shapes compute on dequantised fp32
    const sdpa::ForwardArgs a{
        .shape = deep, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data()};
    CHECK_THROWS_AS(kern.forward(a), std::invalid_argument);
    // At the limit, rows of +-127 give the largest sums and offsets the format allows; every
    // value row is 1 (127 times its scale 1/127), so O is 1 up to that scale's rounding.
    sdpa::ForwardArgs at_limit = a;
    at_limit.shape = ok;
    CHECK_NOTHROW(kern.forward(at_limit));
    for (const float o : out) CHECK(std::abs(o - 1.0f) <= 4 * FLT_EPSILON);
  }
  CHECK(entries >= 2);
}

// A stored cache starts its K and V on a cache line (sdpa/aligned.hpp), as the timing kind's
// tensors do: at sizes (4-8 MiB here) where malloc's blocks, and so std::vector's, start 16 bytes
// past a page, every 64-byte load of a K row would straddle two lines.
TEST_CASE("stored K and V start on a cache line, as AlignedVector's elements do") {
  const auto on_line = [](const void* p) { return std::uintptr_t(p) % sdpa::kCacheLine == 0; };
  const Shape s{.batch_heads = 8, .n_q = 1, .n_kv = 2048, .d_k = 128, .d_v = 128};
  sdpa::AlignedVector<float> x(std::size_t(s.k_elements()), 0.5f),
      out(std::size_t(s.out_elements()));
  CHECK(on_line(x.data()));
  CHECK(on_line(sdpa::aligned_floats(1000).get()));
  sdpa::ForwardArgs a{.shape = s, .q = x.data(), .k = x.data(), .v = x.data(), .out = out.data()};
  const auto f16 = sdpa::find_kernel("flash-kv-f16")->store_kv(a);
  const auto& kv16 = dynamic_cast<const sdpa::detail::StoredKv16&>(*f16);
  CHECK(on_line(kv16.k.data()));
  CHECK(on_line(kv16.v.data()));
  const auto int8 = sdpa::find_kernel("flash-kv-int8")->store_kv(a);
  const auto& kv8 = dynamic_cast<const sdpa::detail::StoredKvInt8&>(*int8);
  CHECK(on_line(kv8.k.data()));
  CHECK(on_line(kv8.v.data()));
}
