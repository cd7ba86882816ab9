// Backward kernels: the fp64 reference against central finite differences of a scalar loss,
// and every registered backward against the reference on awkward shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels_under_test.hpp"
#include "run_report.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/rng.hpp"

namespace {

struct Case {
  sdpa::Shape shape;
  bool causal;
  double scale;
};

std::vector<double> normals(std::uint32_t stream, std::int64_t n) {
  sdpa::PhiloxStream rng({.seed = 99, .experiment = 1, .cell = stream});
  std::vector<double> x(n);
  sdpa::fill_normal<double>(rng, x);
  return x;
}

std::vector<float> floats(std::uint32_t stream, std::int64_t n) {
  const auto x = normals(stream, n);
  return {x.begin(), x.end()};
}

// One forward and backward of a kernel on fp32 inputs.
struct Run {
  std::vector<float> out, lse, dq, dk, dv;
};
Run forward_backward(const sdpa::Kernel& kernel, const sdpa::Shape& s, const std::vector<float>& q,
                     const std::vector<float>& k, const std::vector<float>& v,
                     const std::vector<float>& d_out, double scale, bool causal, int threads,
                     sdpa::GradProbes* probes) {
  Run r{std::vector<float>(s.out_elements()), std::vector<float>(s.rows()),
        std::vector<float>(q.size()), std::vector<float>(k.size()), std::vector<float>(v.size())};
  sdpa::ForwardArgs fwd{
      .shape = s, .q = q.data(), .k = k.data(), .v = v.data(), .out = r.out.data()};
  fwd.lse = r.lse.data(), fwd.scale = float(scale), fwd.mask.causal = causal, fwd.threads = threads;
  kernel.forward(fwd);
  auto bwd = sdpa::backward_of(fwd, d_out.data(), r.dq.data(), r.dk.data(), r.dv.data());
  bwd.probes = probes;
  kernel.backward(bwd);
  return r;
}

// The backward's rounding bound per gradient entry, derived as the forward's (test_kernels.cpp's
// header: first order in u = 2^-24, worst-case sums of n terms (n - 1) u in any order, times
// kSafety = 2) through the steps every backward takes (FlashAttention-2's), from the fp64
// quantities of the fp32 inputs. Per row i (n_i visible keys) and visible key j:
//   s_ij = scale q_i.k_j with the forward's error u E_ij, E_ij = (d_k + 2) A_ij + |s_ij - m_i|
//     + |s_ij| + R_i + 4; the forward's lse within u L_i, L_i = Ebar_i + n_i + 4 + |lse_i|;
//   P_ij = e^(s_ij - lse_i), relative error dP_ij = u (E_ij + L_i + |s_ij - lse_i| + 4)
//     (the scores', lse's, the argument's rounding and exp's ULPs);
//   dP_ij = dO_i.v_j within u (d_v + 2) sum_c |dO_ic v_jc|;
//   D_i = dO_i.O_i within u (d_v + 2) sum_c |dO_ic O_ic| + sum_c |dO_ic| eO_ic, with the forward's
//     eO_ic <= u (4 Emax_i + 2 n_i + 8) sum_j P_ij |v_jc| (its bound, |v_jc - O_ic| <= 2 of that);
//   dS_ij = P_ij (dP_ij - D_i) within eS_ij = P_ij [(dP_ij + 2 u) |dP_ij - D_i| + e(dP) + e(D)];
//   dV_jc = sum_i P_ij dO_ic within sum_i P_ij |dO_ic| (dP_ij + (N_j + 2) u), N_j the rows (of
//     the group's heads) that see key j;
//   dQ_ic = scale sum_j dS_ij k_jc within |scale| sum_j (eS_ij |k_jc| + (n_i + 2) u |dS_ij k_jc|);
//   dK_jc = scale sum_i dS_ij q_ic within |scale| sum_i (eS_ij |q_ic| + (N_j + 2) u |dS_ij q_ic|).
struct BackwardBound {
  std::vector<double> d_q, d_k, d_v;
  std::vector<double> ds_max, ds_norm;  // per row: max_j eS_ij and (sum_j eS_ij^2)^(1/2)
};

BackwardBound backward_bound(const sdpa::Shape& s, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& d_out, double scale, bool causal) {
  constexpr double u = 0x1p-24, kSafety = 2;
  BackwardBound b{std::vector<double>(q.size(), 0), std::vector<double>(k.size(), 0),
                  std::vector<double>(v.size(), 0), std::vector<double>(std::size_t(s.rows()), 0),
                  std::vector<double>(std::size_t(s.rows()), 0)};
  // N_j: rows of a K/V head's group that see key j (the same for every group).
  std::vector<double> seen_by(std::size_t(s.n_kv), 0);
  for (std::int64_t i = 0; i < s.n_q; ++i)
    for (std::int64_t j = 0; j < sdpa::Mask{.causal = causal}.visible(s, i).end; ++j)
      seen_by[std::size_t(j)] += double(s.group);
  std::vector<double> sc, a, p, dp, rel, es, o(std::size_t(s.d_v)), mass(std::size_t(s.d_v));
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q);
    const std::int64_t n = sdpa::Mask{.causal = causal}.visible(s, r % s.n_q).end;
    if (n == 0) continue;
    const float* qi = q.data() + r * s.d_k;
    const float* doi = d_out.data() + r * s.d_v;
    const float* kh = k.data() + kv * s.n_kv * s.d_k;
    const float* vh = v.data() + kv * s.n_kv * s.d_v;
    sc.assign(n, 0), a.assign(n, 0), p.assign(n, 0), dp.assign(n, 0), rel.assign(n, 0);
    es.assign(n, 0);
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t c = 0; c < s.d_k; ++c) {
        sc[j] += double(qi[c]) * kh[j * s.d_k + c];
        a[j] += std::abs(double(qi[c]) * kh[j * s.d_k + c]);
      }
      sc[j] *= scale, a[j] *= std::abs(scale);
    }
    const double m = *std::max_element(sc.begin(), sc.end());
    const double range = m - *std::min_element(sc.begin(), sc.end());
    double l = 0;
    for (std::int64_t j = 0; j < n; ++j) l += std::exp(sc[j] - m);
    const double lse = m + std::log(l);
    double e_bar = 0, e_max = 0;
    std::vector<double> e(n);
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] = std::exp(sc[j] - lse);
      e[j] = (s.d_k + 2) * a[j] + (m - sc[j]) + std::abs(sc[j]) + range + 4;
      e_bar += p[j] * e[j], e_max = std::max(e_max, e[j]);
    }
    const double lse_units = e_bar + double(n) + 4 + std::abs(lse);
    // D_i and its error.
    std::fill(o.begin(), o.end(), 0.0), std::fill(mass.begin(), mass.end(), 0.0);
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t c = 0; c < s.d_v; ++c) {
        o[c] += p[j] * vh[j * s.d_v + c];
        mass[c] += p[j] * std::abs(double(vh[j * s.d_v + c]));
      }
    double d = 0, e_d = 0;
    for (std::int64_t c = 0; c < s.d_v; ++c) {
      d += double(doi[c]) * o[c];
      e_d += u * (s.d_v + 2) * std::abs(doi[c] * o[c]) +
             std::abs(double(doi[c])) * u * (4 * e_max + 2 * double(n) + 8) * mass[c];
    }
    for (std::int64_t j = 0; j < n; ++j) {
      double abs_dp = 0;
      for (std::int64_t c = 0; c < s.d_v; ++c) {
        dp[j] += double(doi[c]) * vh[j * s.d_v + c];
        abs_dp += std::abs(double(doi[c]) * vh[j * s.d_v + c]);
      }
      rel[j] = u * (e[j] + lse_units + std::abs(sc[j] - lse) + 4);
      es[j] = p[j] * ((rel[j] + 2 * u) * std::abs(dp[j] - d) + u * (s.d_v + 2) * abs_dp + e_d);
      b.ds_max[r] = std::max(b.ds_max[r], es[j]);
      b.ds_norm[r] += es[j] * es[j];
    }
    b.ds_norm[r] = std::sqrt(b.ds_norm[r]);
    for (std::int64_t j = 0; j < n; ++j) {
      const double ds = p[j] * (dp[j] - d), nj = seen_by[std::size_t(j)];
      for (std::int64_t c = 0; c < s.d_k; ++c) {
        b.d_q[r * s.d_k + c] +=
            std::abs(scale) * (es[j] * std::abs(kh[j * s.d_k + c]) +
                               (double(n) + 2) * u * std::abs(ds * kh[j * s.d_k + c]));
        b.d_k[(kv * s.n_kv + j) * s.d_k + c] +=
            std::abs(scale) * (es[j] * std::abs(qi[c]) + (nj + 2) * u * std::abs(ds * qi[c]));
      }
      for (std::int64_t c = 0; c < s.d_v; ++c)
        b.d_v[(kv * s.n_kv + j) * s.d_v + c] +=
            p[j] * std::abs(double(doi[c])) * (rel[j] + (nj + 2) * u);
    }
  }
  for (auto* x : {&b.d_q, &b.d_k, &b.d_v, &b.ds_max, &b.ds_norm})
    for (double& t : *x) t *= kSafety;
  return b;
}

WorstRatio g_worst_gradient{"|grad - grad_ref| / bound of the backward kernels"};

// The fp64 reference kernel's gradient probes on fp32 inputs (the oracle for every probe).
sdpa::GradProbes reference_probes(const sdpa::Shape& s, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const std::vector<float>& d_out, double scale, bool causal) {
  sdpa::GradProbes probes(s.rows());
  forward_backward(*sdpa::find_kernel("reference"), s, q, k, v, d_out, scale, causal, 1, &probes);
  return probes;
}

// L = sum(O * dO): its gradient is exactly what a backward computes from dO.
double loss(const sdpa::Shape& s, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v, const std::vector<double>& d_out, double scale,
            bool causal) {
  const auto o = sdpa::reference_attention(s, q, k, v, scale, sdpa::Mask{.causal = causal}).out;
  double l = 0;
  for (std::size_t i = 0; i < o.size(); ++i) l += o[i] * d_out[i];
  return l;
}

}  // namespace

TEST_CASE("reference backward matches central finite differences") {
  // The last two: query heads in groups of 2 and 3 sharing a K/V head (dK, dV sum over them).
  for (const Case& c : {Case{{2, 3, 5, 4, 3}, false, 0.5}, Case{{1, 4, 4, 3, 2}, true, 1.0},
                        Case{{1, 3, 6, 2, 5}, true, 0.7}, Case{{4, 2, 3, 3, 2, 2}, true, 0.8},
                        Case{{3, 3, 4, 2, 3, 3}, false, 0.6}}) {
    const auto& s = c.shape;
    auto q = normals(1, s.q_elements()), k = normals(2, s.k_elements()),
         v = normals(3, s.v_elements()), d_out = normals(4, s.out_elements());
    const auto g = sdpa::reference_attention_backward(s, q, k, v, d_out, c.scale,
                                                      sdpa::Mask{.causal = c.causal});
    // Central differences have error O(h^2) ~ 1e-8 relative; rounding adds ~1e-16/h ~ 1e-11.
    const double h = 1e-4;
    auto check = [&](std::vector<double>& x, const std::vector<double>& analytic) {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = loss(s, q, k, v, d_out, c.scale, c.causal);
        x[i] = saved - h;
        const double down = loss(s, q, k, v, d_out, c.scale, c.causal);
        x[i] = saved;
        CHECK(analytic[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6).scale(1));
      }
    };
    check(q, g.d_q);
    check(k, g.d_k);
    check(v, g.d_v);
  }
}

TEST_CASE("every backward agrees with the fp64 reference on awkward shapes") {
  const std::vector<Case> cases = {
      {{1, 1, 1, 1, 1}, false, 1.0},
      {{1, 1, 7, 8, 3}, false, 0.35},
      {{2, 17, 17, 64, 80}, true, 0.125},
      {{3, 5, 63, 80, 16}, true, 1.0},
      {{1, 65, 33, 8, 8}, true, 0.5},
      {{1, 40, 127, 128, 64}, false, 0.0884},
      {{1, 50, 70, 160, 136}, true, 0.08},  // d_k, d_v past one depth chunk (128) of a Gemm
      // Grouped query heads (the sixth field: query heads per K/V head): GQA, MQA, decode-like
      // rows, one key, n_q > n_kv with causal masking.
      {{6, 17, 33, 16, 8, 3}, true, 0.25},
      {{4, 50, 70, 32, 40, 4}, false, 0.15},
      {{8, 1, 300, 64, 64, 4}, true, 0.125},
      {{4, 3, 1, 8, 8, 2}, false, 0.5},
      {{2, 5, 2, 8, 3, 2}, true, 0.5},
      {{16, 1, 200, 32, 16, 8}, true, 0.2},  // batch 2 of MQA 8/1: dK, dV sum over 8 heads
      // Keys in several tiles per range of flash's single pass (tiles of 128 keys, at most 4
      // ranges: here 6 tiles in ranges of 1, 2, 1, 2, the last tile 60 keys), with causal
      // blocks that see part of a range or none of it, and a group summing over ranges.
      {{1, 600, 700, 8, 4}, true, 0.3},
      {{4, 30, 650, 8, 8, 2}, false, 0.2},
  };
  for (const sdpa::Kernel& kernel : kernels_under_test()) {
    if (!kernel.backward) continue;
    for (const auto& c : cases) {
      const auto& s = c.shape;
      CAPTURE(kernel.name);
      CAPTURE(s.batch_heads);
      CAPTURE(s.n_q);
      CAPTURE(s.n_kv);
      CAPTURE(s.d_k);
      CAPTURE(s.d_v);
      CAPTURE(c.causal);
      const auto qd = normals(5, s.q_elements()), kd = normals(6, s.k_elements()),
                 vd = normals(7, s.v_elements()), dod = normals(8, s.out_elements());
      // Round inputs to fp32 first, so the reference sees exactly what the kernel sees.
      const std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()),
          v(vd.begin(), vd.end()), d_out(dod.begin(), dod.end());
      const std::vector<double> q64(q.begin(), q.end()), k64(k.begin(), k.end()),
          v64(v.begin(), v.end()), do64(d_out.begin(), d_out.end());
      const auto ref = sdpa::reference_attention_backward(s, q64, k64, v64, do64, c.scale,
                                                          sdpa::Mask{.causal = c.causal});

      sdpa::GradProbes probes(s.rows());
      const auto [out, lse, dq, dk, dv] =
          forward_backward(kernel, s, q, k, v, d_out, c.scale, c.causal, 2, &probes);

      // Each gradient entry within its derived bound (backward_bound).
      const BackwardBound bound = backward_bound(s, q, k, v, d_out, c.scale, c.causal);
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
      CHECK(worst_ratio(dq, ref.d_q, bound.d_q) <= 1);
      CHECK(worst_ratio(dk, ref.d_k, bound.d_k) <= 1);
      CHECK(worst_ratio(dv, ref.d_v, bound.d_v) <= 1);
      // The probes against the fp64 reference's on the same fp32 inputs. Each dS_ij is within
      // eS_ij (backward_bound), so max |dS| moves by at most max_j eS_ij and ||dS|| (the root of
      // the sum of squares) by at most (sum_j eS_ij^2)^(1/2), by the triangle inequality.
      // Participation may differ by a key whose |dS| sits within that rounding of the 1e-3
      // threshold (a row whose dS is zero in exact arithmetic, one visible key, counts its
      // rounding residue as one).
      const auto ref_probes = reference_probes(s, q, k, v, d_out, c.scale, c.causal);
      for (std::int64_t r = 0; r < s.rows(); ++r) {
        CAPTURE(r);
        CHECK(probes.visible[r] == sdpa::Mask{.causal = c.causal}.visible(s, r % s.n_q).end);
        CHECK(probes.participating[r] <= probes.visible[r]);
        CHECK(std::abs(probes.ds_max_abs[r] - ref_probes.ds_max_abs[r]) <= bound.ds_max[r]);
        CHECK(std::abs(std::sqrt(probes.ds_sumsq[r]) - std::sqrt(ref_probes.ds_sumsq[r])) <=
              bound.ds_norm[r]);
        CHECK(std::abs(probes.participating[r] - ref_probes.participating[r]) <= 1);
      }
    }
  }
}

TEST_CASE("every backward is bit-identical on 1, 2 and 3 threads") {
  // Without and with grouped query heads (dK and dV summed over a group's heads), and keys in
  // four ranges of flash's single pass (dQ summed over the ranges).
  for (const sdpa::Shape s : {sdpa::Shape{2, 100, 130, 40, 24}, sdpa::Shape{6, 60, 70, 24, 16, 3},
                              sdpa::Shape{2, 150, 600, 16, 8}})
    for (bool causal : {false, true})
      for (const sdpa::Kernel& kernel : kernels_under_test()) {
        if (!kernel.backward) continue;
        CAPTURE(kernel.name);
        CAPTURE(s.group);
        CAPTURE(causal);
        const auto q = floats(9, s.q_elements()), k = floats(10, s.k_elements()),
                   v = floats(11, s.v_elements()), d_out = floats(12, s.out_elements());
        std::vector<float> grads[3];
        sdpa::GradProbes probes[3] = {sdpa::GradProbes(s.rows()), sdpa::GradProbes(s.rows()),
                                      sdpa::GradProbes(s.rows())};
        for (int t = 0; t < 3; ++t) {
          const Run r = forward_backward(kernel, s, q, k, v, d_out, 0.3, causal, t + 1, &probes[t]);
          grads[t] = r.dq;
          grads[t].insert(grads[t].end(), r.dk.begin(), r.dk.end());
          grads[t].insert(grads[t].end(), r.dv.begin(), r.dv.end());
        }
        for (int t = 1; t < 3; ++t) {
          CAPTURE(t + 1);
          CHECK(grads[0] == grads[t]);
          CHECK(probes[0].ds_sumsq == probes[t].ds_sumsq);
          CHECK(probes[0].participating == probes[t].participating);
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
