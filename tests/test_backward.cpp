// Backward kernels: the fp64 reference against central finite differences of a scalar loss,
// and every registered backward against the reference on awkward shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attention_catalogue.hpp"
#include "kernels_under_test.hpp"
#include "run_report.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/precision.hpp"

namespace {

using catalogue::Case;

// One forward and backward of a kernel on fp32 inputs (d_sinks: one per entry of mod.sinks).
struct Run {
  std::vector<float> out, lse, dq, dk, dv, d_sinks;
};
Run forward_backward(const sdpa::Kernel& kernel, const sdpa::Shape& s, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v,
                     const std::vector<float>& d_out, double scale, const sdpa::Mask& mask,
                     const sdpa::ScoreMod& mod, int threads, sdpa::GradProbes* probes) {
  Run r{std::vector<float>(s.out_elements()), std::vector<float>(s.rows()),
        std::vector<float>(q.size()),         std::vector<float>(k.size()),
        std::vector<float>(v.size()),         std::vector<float>(mod.sinks.size(), NAN)};
  const sdpa::ForwardArgs fwd{.shape = s,
                              .q = q.data(),
                              .k = k.data(),
                              .v = v.data(),
                              .out = r.out.data(),
                              .lse = r.lse.data(),
                              .scale = float(scale),
                              .mask = mask,
                              .score_mod = mod,
                              .threads = threads};
  kernel.forward(fwd);
  auto bwd = sdpa::backward_of(fwd, d_out.data(), r.dq.data(), r.dk.data(), r.dv.data());
  bwd.score_mod = mod;
  bwd.probes = probes;
  if (!mod.sinks.empty()) bwd.d_sinks = r.d_sinks.data();
  kernel.backward(bwd);
  return r;
}
Run forward_backward(const sdpa::Kernel& kernel, const sdpa::Shape& s, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v,
                     const std::vector<float>& d_out, double scale, bool causal, int threads,
                     sdpa::GradProbes* probes) {
  return forward_backward(kernel, s, q, k, v, d_out, scale, sdpa::Mask{.causal = causal}, {},
                          threads, probes);
}

// The backward's rounding bound per gradient entry, derived as the forward's
// (tests/attention_catalogue.hpp: first order in u = 2^-24, worst-case sums of n terms (n - 1) u
// in any order, times kSafety = 2) through the steps every backward takes (FlashAttention-2's),
// from the fp64 quantities of the fp32 inputs. A precision that rounds (bf16) rounds each operand
// of the backward's products (q, k, v, dO, and P and dS before theirs) by w relative
// (OperandRounding; 0 for fp32): a product of two rounded operands, off by a relative before, is
// off by g(a) = rho + (1 + rho) a, rho = 2 w + w^2 (g(a) = a for fp32); its logits, O and lse as
// the forward's Rounding says (in f_ij, E_ij and its value). Per row i (n_i visible keys, n'_i
// outcomes with the sink) and visible key j, with the catalogue's logit z_ij, its own error f_ij,
// E_ij and the soft-cap's derivative t_ij, and c_i the row's scale (times its temperature):
//   the forward's lse within L_i = Ebar_i + (n'_i + 4 + |lse_i|) u;
//   P_ij = e^(z_ij - lse_i), relative error rel_ij = E_ij + L_i + (|z_ij - lse_i| + 4) u
//     (the logit's, lse's, the argument's rounding and exp's ULPs);
//   dP_ij = dO_i.v_j within g((d_v + 2) u) sum_c |dO_ic v_jc|;
//   D_i = dO_i.O_i (O the forward's, not rounded again) within (w + (1 + w) (d_v + 2) u)
//     sum_c |dO_ic O_ic| + (1 + w) sum_c |dO_ic| eO_ic, with the forward's
//     eO_ic <= (4 Emax_i + value + (2 n'_i + 8) u) sum_j P_ij |v_jc| (its bound, |v_jc - O_ic| <=
//     2 of that);
//   dS_ij = P_ij (dP_ij - D_i) within eS_ij = P_ij [(rel_ij + 2 u) |dP_ij - D_i| + e(dP) + e(D)];
//   through the soft-cap, dS'_ij = t_ij dS_ij, t = 1 - (cap / softcap)^2 from the computed cap
//     (within f_ij) off by dt_ij = (2 |cap_ij| + f_ij) f_ij / softcap^2 + 3 u: within
//     eS'_ij = t_ij eS_ij + dt_ij (|dS_ij| + eS_ij) + u |dS'_ij| (fp32 leaves the second-order
//     f_ij^2 and dt_ij eS_ij to kSafety; bf16's f_ij is not small beside a tiny soft-cap);
//   the probes see dS'_ij before its rounding: max_j eS'_ij, (sum_j eS'_ij^2)^(1/2);
//   dV_jc = sum_i P_ij dO_ic within sum_i P_ij |dO_ic| g(rel_ij + (N_j + 2) u), N_j the rows (of
//     the group's heads) that see key j;
//   dQ_ic = c_i sum_j dS'_ij k_jc within
//     |c_i| sum_j ((1 + rho) eS'_ij |k_jc| + g((n_i + 2 + T) u) |dS'_ij k_jc|),
//     T = 1 with a temperature (c_i rounded);
//   dK_jc = sum_i c_i dS'_ij q_ic within
//     sum_i |c_i| ((1 + rho) eS'_ij |q_ic| + g((N_j + 2 + T) u) |dS'_ij q_ic|);
//   a sink's gradient -sum_i p_sink,i D_i over the R rows that read it, within
//     sum_i p_sink,i (rel_sink,i |D_i| + e(D_i)) + (R + 2) u sum_i p_sink,i |D_i|.
// kSafety covers the second-order terms while the first-order ones are small: as the forward's
// rounding precisions, the bound needs max_j E_ij + Ebar_i <= 1/2 (BackwardBound::first_order).
struct BackwardBound {
  std::vector<double> d_q, d_k, d_v, d_sinks;
  std::vector<double> ds_max, ds_norm;  // per row: max_j eS'_ij and (sum_j eS'_ij^2)^(1/2)
  // Per row: keys whose |dS'_ij| lies within its bound of the participation threshold.
  std::vector<std::int64_t> near_threshold;
  double first_order = 0;  // max_j E_ij + Ebar_i over the rows: the bound needs it <= 1/2
};

// Where a backward rounds beyond its forward (catalogue::rounding_of, whose relative terms only
// the bound takes): each operand of its products by w relative (the derivation above). Null for a
// precision without a backward bound.
struct OperandRounding {
  double w = 0;
};
const OperandRounding* operand_rounding(const std::string& precision) {
  static const OperandRounding fp32{}, bf16{0x1p-8};
  if (precision == "fp32") return &fp32;
  if (precision == "bf16") return &bf16;
  return nullptr;
}

BackwardBound backward_bound(const catalogue::Case& c, const catalogue::Inputs& in,
                             const std::vector<float>& d_out, const catalogue::Rounding& forward,
                             const OperandRounding& operands) {
  constexpr double u = 0x1p-24, kSafety = 2;
  const double w = operands.w, rho = 2 * w + w * w;
  const auto g = [rho](double a) { return rho + (1 + rho) * a; };  // exactly a for fp32
  const double second = w > 0 ? 1 : 0;  // the second-order terms fp32 leaves to kSafety
  const sdpa::Shape& s = c.shape;
  const sdpa::Mask mask = c.mask();
  const std::vector<float>&q = in.q, &k = in.k, &v = in.v;
  BackwardBound b{std::vector<double>(q.size(), 0),
                  std::vector<double>(k.size(), 0),
                  std::vector<double>(v.size(), 0),
                  std::vector<double>(c.sinks.size(), 0),
                  std::vector<double>(std::size_t(s.rows()), 0),
                  std::vector<double>(std::size_t(s.rows()), 0),
                  std::vector<std::int64_t>(std::size_t(s.rows()), 0)};
  // N_j: rows of a K/V head's group that see key j (the same for every group); R: rows per sink.
  std::vector<double> seen_by(std::size_t(s.n_kv), 0), sink_rows(c.sinks.size(), 0),
      sink_abs(c.sinks.size(), 0);
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const sdpa::KeyRange r = mask.visible(s, i);
    for (std::int64_t j = r.begin; j < r.end; ++j) seen_by[std::size_t(j)] += double(s.group);
  }
  for (std::int64_t h = 0; h < s.batch_heads; ++h)
    if (!c.sinks.empty()) sink_rows[std::size_t(h) % c.sinks.size()] += double(s.n_q);
  const double temperature = c.temperature.empty() ? 0 : 1;
  std::vector<double> dp, rel, es, dsc, o(std::size_t(s.d_v)), mass(std::size_t(s.d_v));
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q), i = r % s.n_q;
    double lse = 0;
    const std::vector<catalogue::Outcome> row = catalogue::row_outcomes(c, in, r, forward, &lse);
    const double n = double(mask.visible(s, i).size()), nn = double(row.size());
    if (n == 0) continue;  // no key: no gradient, and the sink's is p_sink D_i = 0 exactly
    const double cs = std::abs(double(c.scale_value()) *
                               (c.temperature.empty() ? 1.0 : double(c.temperature[i])));
    const float* qi = q.data() + r * s.d_k;
    const float* doi = d_out.data() + r * s.d_v;
    const float* kh = k.data() + kv * s.n_kv * s.d_k;
    const float* vh = v.data() + kv * s.n_kv * s.d_v;
    double e_bar = 0, e_max = 0;
    for (const auto& x : row) e_bar += x.p * x.e, e_max = std::max(e_max, x.e);
    b.first_order = std::max(b.first_order, e_max + e_bar);
    const double lse_err = e_bar + u * (nn + 4 + std::abs(lse));
    std::fill(o.begin(), o.end(), 0.0), std::fill(mass.begin(), mass.end(), 0.0);
    for (const auto& x : row)
      for (std::int64_t cc = 0; x.key >= 0 && cc < s.d_v; ++cc) {
        o[cc] += x.p * vh[x.key * s.d_v + cc];
        mass[cc] += x.p * std::abs(double(vh[x.key * s.d_v + cc]));
      }
    double d = 0, e_d = 0;
    for (std::int64_t cc = 0; cc < s.d_v; ++cc) {
      d += double(doi[cc]) * o[cc];
      e_d += (w + (1 + w) * (u * (s.d_v + 2))) * std::abs(doi[cc] * o[cc]) +
             (1 + w) * std::abs(double(doi[cc])) * (4 * e_max + forward.value + u * (2 * nn + 8)) *
                 mass[cc];
    }
    dp.assign(row.size(), 0), rel.assign(row.size(), 0), es.assign(row.size(), 0);
    dsc.assign(row.size(), 0);
    for (std::size_t x = 0; x < row.size(); ++x) {
      const auto& oc = row[x];
      rel[x] = oc.e + lse_err + u * (std::abs(oc.z - lse) + 4);
      if (oc.key < 0) {  // the sink
        const std::size_t h = std::size_t(r / s.n_q) % c.sinks.size();
        b.d_sinks[h] += oc.p * (rel[x] * std::abs(d) + e_d);
        sink_abs[h] += oc.p * std::abs(d);
        continue;
      }
      double abs_dp = 0;
      for (std::int64_t cc = 0; cc < s.d_v; ++cc) {
        dp[x] += double(doi[cc]) * vh[oc.key * s.d_v + cc];
        abs_dp += std::abs(double(doi[cc]) * vh[oc.key * s.d_v + cc]);
      }
      const double ds = oc.p * (dp[x] - d);
      const double e_ds =
          oc.p * ((rel[x] + 2 * u) * std::abs(dp[x] - d) + g(u * (s.d_v + 2)) * abs_dp + e_d);
      const double cap2 = double(c.softcap) * c.softcap;
      const double dt =
          c.softcap > 0 ? (2 * std::abs(oc.capped) + second * oc.f) * oc.f / cap2 + 3 * u : 0;
      dsc[x] = ds * oc.t;
      es[x] = oc.t * e_ds + (std::abs(ds) + second * e_ds) * dt + u * std::abs(dsc[x]);
      b.ds_max[r] = std::max(b.ds_max[r], es[x]);
      b.ds_norm[r] += es[x] * es[x];
    }
    b.ds_norm[r] = std::sqrt(b.ds_norm[r]);
    // A key counts as participating where |dS'_ij| > 1e-3 max_j |dS'_ij|: the computed and the
    // reference count may differ on the keys whose |dS'_ij| lies within eS'_ij, and the
    // threshold's own move, of the reference threshold.
    double ds_ref_max = 0;
    for (std::size_t x = 0; x < row.size(); ++x)
      if (row[x].key >= 0) ds_ref_max = std::max(ds_ref_max, std::abs(dsc[x]));
    constexpr double kThreshold = sdpa::kParticipationThreshold;
    for (std::size_t x = 0; x < row.size(); ++x)
      b.near_threshold[r] +=
          row[x].key >= 0 && std::abs(std::abs(dsc[x]) - kThreshold * ds_ref_max) <=
                                 kSafety * (es[x] + kThreshold * b.ds_max[r]);
    for (std::size_t x = 0; x < row.size(); ++x) {
      const std::int64_t j = row[x].key;
      if (j < 0) continue;
      const double nj = seen_by[std::size_t(j)];
      for (std::int64_t cc = 0; cc < s.d_k; ++cc) {
        b.d_q[r * s.d_k + cc] +=
            cs * ((1 + rho) * es[x] * std::abs(kh[j * s.d_k + cc]) +
                  g((n + 2 + temperature) * u) * std::abs(dsc[x] * kh[j * s.d_k + cc]));
        b.d_k[(kv * s.n_kv + j) * s.d_k + cc] +=
            cs * ((1 + rho) * es[x] * std::abs(qi[cc]) +
                  g((nj + 2 + temperature) * u) * std::abs(dsc[x] * qi[cc]));
      }
      for (std::int64_t cc = 0; cc < s.d_v; ++cc)
        b.d_v[(kv * s.n_kv + j) * s.d_v + cc] +=
            row[x].p * std::abs(double(doi[cc])) * g(rel[x] + (nj + 2) * u);
    }
  }
  for (std::size_t h = 0; h < c.sinks.size(); ++h)
    b.d_sinks[h] += (sink_rows[h] + 2) * u * sink_abs[h];
  for (auto* x : {&b.d_q, &b.d_k, &b.d_v, &b.d_sinks, &b.ds_max, &b.ds_norm})
    for (double& t : *x) t *= kSafety;
  return b;
}

WorstRatio g_worst_gradient{"|grad - grad_ref| / bound of the backward kernels"};

// L = sum(O * dO): its gradient is exactly what a backward computes from dO.
double loss(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v, const std::vector<double>& d_out) {
  const auto o =
      sdpa::reference_attention(c.shape, q, k, v, c.scale_value(), c.mask(), c.mod()).out;
  double l = 0;
  for (std::size_t i = 0; i < o.size(); ++i) l += o[i] * d_out[i];
  return l;
}

// A kernel's forward and backward within backward_bound of the fp64 reference's gradients (and
// its probes within the bound of the reference kernel's), on the case's inputs. False, checking
// nothing, where the kernel's precision cannot resolve the case's logits (the bound's first-order
// condition fails); a precision without a backward bound fails.
bool check_backward(const sdpa::Kernel& kernel, const Case& c) {
  const sdpa::Shape& s = c.shape;
  INFO(kernel.name, " on ", catalogue::describe(c));
  const catalogue::Rounding* forward = catalogue::rounding_of(kernel.precision);
  const OperandRounding* operands = operand_rounding(kernel.precision);
  if (forward == nullptr || operands == nullptr)
    FAIL(kernel.name, ": no backward bound for precision ", kernel.precision);
  const catalogue::Inputs in = catalogue::random_inputs(s, c.input_std, c.seed);
  const std::vector<float> d_out = catalogue::upstream_gradient(s, c.seed);
  const BackwardBound bound = backward_bound(c, in, d_out, *forward, *operands);
  if (!(bound.first_order <= 0.5)) return false;
  const auto ref = sdpa::reference_attention_backward(
      s, catalogue::widen(in.q), catalogue::widen(in.k), catalogue::widen(in.v),
      catalogue::widen(d_out), c.scale_value(), c.mask(), c.mod());
  sdpa::GradProbes probes(s.rows());
  const Run got = forward_backward(kernel, s, in.q, in.k, in.v, d_out, c.scale_value(), c.mask(),
                                   c.mod(), c.threads, &probes);
  const auto worst_ratio = [](const std::vector<float>& got, const std::vector<double>& want,
                              const std::vector<double>& tol) {
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double err = std::abs(got[i] - want[i]);
      const double ratio = err == 0 ? 0 : err / tol[i];
      if (!(ratio <= worst)) worst = ratio;
    }
    g_worst_gradient.add(worst);
    return worst;
  };
  CHECK(worst_ratio(got.dq, ref.d_q, bound.d_q) <= 1);
  CHECK(worst_ratio(got.dk, ref.d_k, bound.d_k) <= 1);
  CHECK(worst_ratio(got.dv, ref.d_v, bound.d_v) <= 1);
  CHECK(worst_ratio(got.d_sinks, ref.d_sinks, bound.d_sinks) <= 1);
  // The probes against the fp64 reference kernel's on the same fp32 inputs. Each dS'_ij is
  // within eS'_ij (backward_bound), so max |dS'| moves by at most max_j eS'_ij and ||dS'|| (the
  // root of the sum of squares) by at most (sum_j eS'_ij^2)^(1/2), by the triangle inequality.
  // Participation may differ by a key whose |dS'| sits within that rounding of the 1e-3
  // threshold (a row whose dS is zero in exact arithmetic, one visible key, counts its rounding
  // residue as one); with rounded operands, by every key within its bound of the threshold
  // (BackwardBound::near_threshold; at bf16's bound, often many of a row's keys).
  sdpa::GradProbes ref_probes(s.rows());
  forward_backward(*sdpa::find_kernel("reference"), s, in.q, in.k, in.v, d_out, c.scale_value(),
                   c.mask(), c.mod(), 1, &ref_probes);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    CAPTURE(r);
    CHECK(probes.visible[r] == c.mask().visible(s, r % s.n_q).size());
    CHECK(probes.participating[r] <= probes.visible[r]);
    CHECK(std::abs(probes.ds_max_abs[r] - ref_probes.ds_max_abs[r]) <= bound.ds_max[r]);
    CHECK(std::abs(std::sqrt(probes.ds_sumsq[r]) - std::sqrt(ref_probes.ds_sumsq[r])) <=
          bound.ds_norm[r]);
    CHECK(std::abs(probes.participating[r] - ref_probes.participating[r]) <=
          (operands->w > 0 ? std::max<std::int64_t>(1, bound.near_threshold[r]) : 1));
  }
  return true;
}

// The checks a test case left out, by why, listed as NOT RUN.
void note_not_checked(const std::map<std::string, int>& left_out, std::size_t cases,
                      const std::string& what) {
  for (const auto& [why, n] : left_out)
    note_not_run(why + " (" + std::to_string(n) + " of " + std::to_string(cases) + " " + what +
                 ")");
}

// Why a kernel's backward checks nothing on a case its precision cannot resolve.
std::string unresolved(const sdpa::Kernel& kernel) {
  return kernel.name + " backward: " + kernel.precision + " cannot resolve the logits of a case";
}

}  // namespace

TEST_CASE("reference backward matches central finite differences") {
  // Plain, causal and grouped shapes (dK, dV sum over a group's heads), then masks that start
  // late and every modifier: the soft-cap's 1 - tanh^2, ALiBi, the temperature, and the sinks'
  // own gradients.
  const std::vector<float> sinks{0.5f, -0.25f}, slopes{0.5f, 0.125f}, temp{1.5f, 0.5f, 1.0f, 2.0f};
  const std::vector<std::int64_t> docs{0, 2, 3};
  std::vector<Case> cases = {
      {.shape = {2, 3, 5, 4, 3}, .scale = 0.5},
      {.shape = {1, 4, 4, 3, 2}, .causal = true, .scale = 1.0},
      {.shape = {1, 3, 6, 2, 5}, .causal = true, .scale = 0.7},
      {.shape = {4, 2, 3, 3, 2, 2}, .causal = true, .scale = 0.8},
      {.shape = {3, 3, 4, 2, 3, 3}, .scale = 0.6},
      {.shape = {2, 4, 6, 3, 2}, .causal = true, .window_left = 1, .softcap = 1.5f, .scale = 1.0},
      {.shape = {2, 4, 5, 3, 2}, .chunk = 2, .alibi_slopes = slopes, .scale = 0.9},
      {.shape = {2, 4, 5, 3, 2}, .causal = true, .documents = docs, .sinks = sinks, .scale = 0.8},
      {.shape = {4, 4, 4, 2, 3, 2},
       .causal = true,
       .prefix = 2,
       .softcap = 0.7f,
       .sinks = sinks,
       .temperature = temp,
       .scale = 1.1},
      {.shape = {2, 5, 3, 2, 2}, .causal = true, .sinks = sinks, .scale = 0.5},  // empty rows
  };
  std::uint32_t seed = 40;
  for (Case& c : cases) c.seed = seed++;
  for (const Case& c : cases) {
    const auto& s = c.shape;
    INFO(catalogue::describe(c));
    const catalogue::Inputs in = catalogue::random_inputs(s, 1, c.seed);
    auto q = catalogue::widen(in.q), k = catalogue::widen(in.k), v = catalogue::widen(in.v);
    const auto d_out = catalogue::widen(catalogue::upstream_gradient(s, c.seed));
    const auto g =
        sdpa::reference_attention_backward(s, q, k, v, d_out, c.scale_value(), c.mask(), c.mod());
    // Central differences have error O(h^2) ~ 1e-8 relative; rounding adds ~1e-16/h ~ 1e-11.
    const double h = 1e-4;
    auto check = [&](std::vector<double>& x, const std::vector<double>& analytic) {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = loss(c, q, k, v, d_out);
        x[i] = saved - h;
        const double down = loss(c, q, k, v, d_out);
        x[i] = saved;
        CHECK(analytic[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6).scale(1));
      }
    };
    check(q, g.d_q);
    check(k, g.d_k);
    check(v, g.d_v);
    // The sinks are fp32: steps of 2^-12, exact on these values, and the quotient by the step
    // the floats actually took.
    for (std::size_t x = 0; x < c.sinks.size(); ++x) {
      Case up = c, down = c;
      up.sinks[x] += 0x1p-12f, down.sinks[x] -= 0x1p-12f;
      const double fd = (loss(up, q, k, v, d_out) - loss(down, q, k, v, d_out)) /
                        (double(up.sinks[x]) - double(down.sinks[x]));
      CHECK(g.d_sinks[x] == doctest::Approx(fd).epsilon(1e-6).scale(1));
    }
  }
}

TEST_CASE("every backward agrees with the fp64 reference on awkward shapes") {
  const std::vector<Case> cases = {
      {.shape = {1, 1, 1, 1, 1}, .scale = 1.0},
      {.shape = {1, 1, 7, 8, 3}, .scale = 0.35},
      {.shape = {2, 17, 17, 64, 80}, .causal = true, .scale = 0.125},
      {.shape = {3, 5, 63, 80, 16}, .causal = true, .scale = 1.0},
      {.shape = {1, 65, 33, 8, 8}, .causal = true, .scale = 0.5},
      {.shape = {1, 40, 127, 128, 64}, .scale = 0.0884},
      {.shape = {1, 50, 70, 160, 136},
       .causal = true,
       .scale = 0.08},  // past one depth chunk (128)
      // Grouped query heads (the sixth field: query heads per K/V head): GQA, MQA, decode-like
      // rows, one key, n_q > n_kv with causal masking.
      {.shape = {6, 17, 33, 16, 8, 3}, .causal = true, .scale = 0.25},
      {.shape = {4, 50, 70, 32, 40, 4}, .scale = 0.15},
      {.shape = {8, 1, 300, 64, 64, 4}, .causal = true, .scale = 0.125},
      {.shape = {4, 3, 1, 8, 8, 2}, .scale = 0.5},
      {.shape = {2, 5, 2, 8, 3, 2}, .causal = true, .scale = 0.5},
      {.shape = {16, 1, 200, 32, 16, 8}, .causal = true, .scale = 0.2},  // MQA 8/1, batch 2
      // Keys in several tiles per range of flash's single pass (tiles of 128 keys, at most 4
      // ranges: here 6 tiles in ranges of 1, 2, 1, 2, the last tile 60 keys), with causal
      // blocks that see part of a range or none of it, and a group summing over ranges.
      {.shape = {1, 600, 700, 8, 4}, .causal = true, .scale = 0.3},
      {.shape = {4, 30, 650, 8, 8, 2}, .scale = 0.2},
  };
  // A precision that cannot resolve a shape's logits is listed as NOT RUN.
  std::map<std::string, int> unchecked;
  std::uint32_t seed = 60;
  for (const sdpa::Kernel& kernel : kernels_under_test()) {
    if (!kernel.backward) continue;
    for (Case c : cases) {
      c.seed = seed++, c.threads = 2;
      if (!check_backward(kernel, c)) ++unchecked[unresolved(kernel)];
    }
  }
  note_not_checked(unchecked, cases.size(), "awkward shapes");
}

TEST_CASE("every backward agrees with the fp64 reference on the catalogue of masks and modifiers") {
  // What a backward refuses (none today), or its precision cannot resolve, is listed as NOT RUN.
  std::map<std::string, int> refused;
  const auto cases = catalogue::cases();
  std::int64_t checked = 0;
  for (const sdpa::Kernel& kernel : kernels_under_test()) {
    if (!kernel.backward) continue;
    for (const Case& c : cases) {
      if (const std::string why = kernel.refusal(c.shape, c.mask(), c.mod()); !why.empty()) {
        ++refused[kernel.name + " backward: " + why];
        continue;
      }
      if (!check_backward(kernel, c)) {
        ++refused[unresolved(kernel)];
        continue;
      }
      ++checked;
    }
  }
  note_not_checked(refused, cases.size(), "catalogue cases");
  MESSAGE("catalogue: ", cases.size(), " cases, ", checked, " backward x case checks");
  CHECK(checked > 0);
}

// FlashAttention's test rule for the bf16 backward: its error against the fp64 reference within
// twice that of the plain composition that rounds at the same places (the header of
// kernels/flash_backward.cpp's Bf16Gradients), computed naively in fp32: q, k, v, dO rounded,
// scores summed in depth order and scaled, softmax, O from P rounded, dP, D = dO.O,
// dS = P (dP - D), dV from P rounded, dQ and dK from dS rounded. The derived bound above holds
// too but is loose beside bf16's errors; this one fails a kernel that loses what bf16 keeps.
struct Gradients {
  std::vector<float> dq, dk, dv;
};
Gradients plain_bf16_backward(const Case& c, const catalogue::Inputs& in,
                              const std::vector<float>& d_out) {
  const auto round = sdpa::stored_formats("bf16")->q.round;
  const sdpa::Shape& s = c.shape;
  const float scale = float(c.scale_value());
  Gradients g{std::vector<float>(in.q.size(), 0.0f), std::vector<float>(in.k.size(), 0.0f),
              std::vector<float>(in.v.size(), 0.0f)};
  std::vector<float> p, dp;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q), n = c.mask().visible(s, r % s.n_q).end;
    if (n == 0) continue;
    const auto q = [&](std::int64_t x) { return round(in.q[r * s.d_k + x]); };
    const auto k = [&](std::int64_t j, std::int64_t x) {
      return round(in.k[(kv * s.n_kv + j) * s.d_k + x]);
    };
    const auto v = [&](std::int64_t j, std::int64_t x) {
      return round(in.v[(kv * s.n_kv + j) * s.d_v + x]);
    };
    const auto d_o = [&](std::int64_t x) { return round(d_out[r * s.d_v + x]); };
    p.assign(std::size_t(n), 0.0f), dp.assign(std::size_t(n), 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::int64_t x = 0; x < s.d_k; ++x) acc += q(x) * k(j, x);
      p[j] = scale * acc;
    }
    const float m = *std::max_element(p.begin(), p.end());
    float l = 0;
    for (float& x : p) l += x = std::exp(x - m);
    for (float& x : p) x /= l;
    float d = 0;
    for (std::int64_t x = 0; x < s.d_v; ++x) {
      float o = 0;
      for (std::int64_t j = 0; j < n; ++j) o += round(p[j]) * v(j, x);
      d += d_o(x) * o;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t x = 0; x < s.d_v; ++x) dp[j] += d_o(x) * v(j, x);
      const float ds = round(p[j] * (dp[j] - d));
      for (std::int64_t x = 0; x < s.d_v; ++x)
        g.dv[(kv * s.n_kv + j) * s.d_v + x] += round(p[j]) * d_o(x);
      for (std::int64_t x = 0; x < s.d_k; ++x) {
        g.dq[r * s.d_k + x] += scale * ds * k(j, x);
        g.dk[(kv * s.n_kv + j) * s.d_k + x] += scale * ds * q(x);
      }
    }
  }
  return g;
}

TEST_CASE("the bf16 backward within twice the plain composition's error") {
  // Odd depths and key counts (pairs padded), grouped heads, several query blocks, key tiles and
  // ranges, causal blocks that see part of a tile.
  const std::vector<Case> cases = {
      {.shape = {1, 1, 7, 8, 3}, .scale = 0.35},
      {.shape = {2, 17, 17, 64, 80}, .causal = true, .scale = 0.125},
      {.shape = {6, 17, 33, 16, 8, 3}, .causal = true, .scale = 0.25},
      {.shape = {1, 40, 127, 128, 64}, .scale = 0.0884},
      {.shape = {2, 130, 301, 65, 33, 2}, .causal = true, .scale = 0.12},
      {.shape = {16, 1, 200, 32, 16, 8}, .causal = true, .scale = 0.2},
  };
  std::int64_t checked = 0;
  std::uint32_t seed = 90;
  for (const sdpa::Kernel& kernel : kernels_under_test()) {
    if (!kernel.backward || kernel.precision != "bf16") continue;
    for (Case c : cases) {
      c.seed = seed++;
      INFO(kernel.name, " on ", catalogue::describe(c));
      const sdpa::Shape& s = c.shape;
      const catalogue::Inputs in = catalogue::random_inputs(s, 1, c.seed);
      const std::vector<float> d_out = catalogue::upstream_gradient(s, c.seed);
      const auto ref = sdpa::reference_attention_backward(
          s, catalogue::widen(in.q), catalogue::widen(in.k), catalogue::widen(in.v),
          catalogue::widen(d_out), c.scale_value(), c.mask());
      const Gradients plain = plain_bf16_backward(c, in, d_out);
      const Run got = forward_backward(kernel, s, in.q, in.k, in.v, d_out, c.scale_value(),
                                       c.mask(), c.mod(), 2, nullptr);
      const struct {
        const char* name;
        const std::vector<float>&got, &plain;
        const std::vector<double>& ref;
      } grads[] = {{"dQ", got.dq, plain.dq, ref.d_q},
                   {"dK", got.dk, plain.dk, ref.d_k},
                   {"dV", got.dv, plain.dv, ref.d_v}};
      for (const auto& x : grads) {
        const double error = catalogue::max_error(x.got, x.ref),
                     plain_error = catalogue::max_error(x.plain, x.ref);
        CHECK_MESSAGE(plain_error > 0,
                      std::string(x.name));  // bf16 rounds: a zero error tests nothing
        CHECK_MESSAGE(error <= 2 * plain_error, std::string(x.name), " max error ", error,
                      " vs the plain composition's ", plain_error);
      }
      ++checked;
    }
  }
  if (checked == 0)
    note_not_run(
        "the bf16 backward against the plain composition: no bf16 kernel "
        "with a backward here (flash-bf16@avx512-bf16 needs AVX512_BF16)");
}

TEST_CASE("every backward is bit-identical on 1, 2 and 3 threads") {
  // Without and with grouped query heads (dK and dV summed over a group's heads), and keys in
  // four ranges of flash's single pass (dQ summed over the ranges); plain, causal, and a window
  // with every modifier (the sinks' gradients summed over heads).
  const std::vector<float> sinks{0.5f, -1.0f}, slopes{0.25f, 0.5f};
  for (const sdpa::Shape s : {sdpa::Shape{2, 100, 130, 40, 24}, sdpa::Shape{6, 60, 70, 24, 16, 3},
                              sdpa::Shape{2, 150, 600, 16, 8}}) {
    const std::vector<float> temp = catalogue::temperature(s);
    for (const Case& c : {Case{.shape = s, .scale = 0.3, .seed = 9},
                          Case{.shape = s, .causal = true, .scale = 0.3, .seed = 9},
                          Case{.shape = s,
                          .causal = true,
                          .window_left = 50,
                          .softcap = 3,
                          .alibi_slopes = slopes,
                          .sinks = sinks,
                          .temperature = temp,
                          .scale = 0.3,
                          .seed = 9}})
      for (const sdpa::Kernel& kernel : kernels_under_test()) {
        if (!kernel.backward) continue;
        if (!kernel.refusal(s, c.mask(), c.mod()).empty()) continue;
        INFO(kernel.name, " on ", catalogue::describe(c));
        const catalogue::Inputs in = catalogue::random_inputs(s, 1, c.seed);
        const std::vector<float> d_out = catalogue::upstream_gradient(s, c.seed);
        std::vector<float> grads[3];
        sdpa::GradProbes probes[3] = {sdpa::GradProbes(s.rows()), sdpa::GradProbes(s.rows()),
                                      sdpa::GradProbes(s.rows())};
        for (int t = 0; t < 3; ++t) {
          const Run r = forward_backward(kernel, s, in.q, in.k, in.v, d_out, c.scale, c.mask(),
                                         c.mod(), t + 1, &probes[t]);
          grads[t] = r.dq;
          for (const auto* x : {&r.dk, &r.dv, &r.d_sinks})
            grads[t].insert(grads[t].end(), x->begin(), x->end());
        }
        for (int t = 1; t < 3; ++t) {
          CAPTURE(t + 1);
          CHECK(grads[0] == grads[t]);
          CHECK(probes[0].ds_sumsq == probes[t].ds_sumsq);
          CHECK(probes[0].participating == probes[t].participating);
        }
      }
  }
}

TEST_CASE("gradient probes: sum of dS^2 equals the row's score gradients") {
  // One query, two keys, V = [1, 0]: dS = p (dP - p.dP), with dP = [dO, 0].
  const sdpa::Shape s{1, 1, 2, 1, 1};
  const std::vector<float> q = {1}, k = {0, 4}, v = {1, 0}, d_out = {1};
  sdpa::GradProbes probes(1);
  forward_backward(*sdpa::find_kernel("reference"), s, q, k, v, d_out, 1.0, false, 1, &probes);
  const double p0 = 1 / (1 + std::exp(4.0)), p1 = 1 - p0;  // softmax([0, 4])
  const double ds0 = p0 * (1 - p0), ds1 = p1 * (0 - p0);   // p_j (dP_j - sum p dP)
  CHECK(probes.ds_sumsq[0] == doctest::Approx(ds0 * ds0 + ds1 * ds1));
  CHECK(probes.ds_max_abs[0] == doctest::Approx(ds0));
  CHECK(probes.participating[0] == 2);
}
