// Experiment `precision`: how much accuracy a kernel's number formats cost, and whether the
// scale decides it. Per cell it runs a kernel (its precision from the registry) on Q, K of the
// cell's input distribution and V ~ N(0, 1) (d_v = d_k), and measures the error of O and of lse
// against the fp64 reference of the same inputs, split in two (docs/theory.md,
// "Rounding"): what rounding the inputs to the precision's formats costs (fp64 attention of the
// rounded inputs against fp64 of the originals) and what the kernel's arithmetic adds (the
// kernel against fp64 of the rounded inputs). Beside each RMS error, a first-order prediction
// from the unit roundoffs, the scores and the attention weights (below).
//
// Errors: O's relative to O's size over the trial's rows, ||O - O_ref|| / ||O_ref|| (RMS) and
// max |O - O_ref| / max |O_ref| (max); lse's in nats, which is the relative error of the row's
// normaliser sum_j e^{s_j} (RMS and max over rows). Rows whose kernel output is not finite are
// counted (nonfinite_rows) and left out of the errors.
//
// Prediction. A value x rounded to a format of unit roundoff u becomes x (1 + d), d within
// [-u, u]; for significands spread log-uniformly (Benford, as Gaussian data is)
// E[d^2] = (u^2 / 3) E[1 / m^2] over m in [1, 2) = u^2 / (8 ln 2) =: w u^2, roundings
// independent. Per row, with fp64 quantities of the original inputs: scores s_j = c q.k_j,
// weights P = softmax(s), O = sum_j P_j v_j, and A_j = c^2 sum_i q_i^2 k_ji^2.
//  - A score error e_j moves the weights by P_j (e_j - sum_l P_l e_l) to first order, so
//    dlse = sum_j P_j e_j and dO = sum_j P_j (v_j - O) e_j (the mean term cancels exactly).
//  - Inputs (u_q, u_k, u_v those of the stored formats; 0 where a tensor stays fp32):
//    e_j = c sum_i q_i k_ji (d_qi + d_kji); d_q is shared by every key, d_k is not:
//      E dlse^2   = w [u_q^2 c^2 sum_i q_i^2 kbar_i^2 + u_k^2 sum_j P_j^2 A_j],  kbar = sum_j P_j
//      k_j E|dO|^2    = w [u_q^2 c^2 sum_i q_i^2 |C_i|^2 + u_k^2 sum_j P_j^2 A_j |v_j - O|^2
//                      + u_v^2 sum_j P_j^2 |v_j|^2],      C_i = sum_j P_j k_ji (v_j - O)
//    ("rounding a score s perturbs its logit by about u |s|": unscaled scores are sqrt(d_k)
//    times larger, so is this part; and it fades as P becomes one-hot, since dO needs spread
//    weights.)
//  - Kernel arithmetic: the weights rounded to the P format before P V (u_p; the row sum adds
//    the unrounded ones) gives w u_p^2 sum_j P_j^2 |v_j|^2 over every key but the top one
//    (its weight is e^0 = 1, exact); fp32 (u = 2^-24) adds to each
//    score w u^2 (A_j d_k / 2 + s_j^2 + (s_j - m)^2 + 1) (a d_k-term sum, the scale, the max
//    subtraction, exp), and to the sums over keys w u^2 sum_t (partial sum_t)^2 in key order
//    (the normaliser's, which also divides O, and P V's). Kernels sum in tiles and lanes, so
//    the fp32 terms are an upper estimate: `approximate`.
//  - A format with a scale per row (int8: kv-int8's Q, K and V) rounds an element of row x by an
//    error uniform within half its step sigma = max|x| / 127, of variance sigma^2 / 12 whatever
//    the element, but the largest, which is exact: in the terms above, w u^2 x^2 becomes
//    g sigma_row^2 / 12 with g = (n - 1) / n for a row of n (so u_k^2 A_j becomes
//    c^2 |q|^2 g sigma_j^2 / 12, u_v^2 |v_j|^2 becomes d_v g sigma_j^2 / 12 and u_q^2 q_i^2
//    g sigma_q^2 / 12, sigma_q that of the row of c q the decode path rounds).
// Per trial the predicted mean square is these summed over the rows over ||O_ref||^2 (O) or the
// rows (lse); the record gives the root of its mean over trials beside the root of the measured
// mean square and of its CI's bounds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "checks.hpp"
#include "kinds.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/precision.hpp"
#include "sdpa/stats.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

const double kW = 1.0 / (8.0 * std::log(2.0));  // E[d^2] / u^2 (above)
constexpr double kU32 = 0x1p-24;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The errors of one comparison and their predictions (NaN where none).
struct Errors {
  // Mean squares (O's relative to its own), so that their means over trials compare with the
  // predicted ones without Jensen's bias; the record shows their square roots.
  double o_ms = kNaN, o_max = kNaN, lse_ms = kNaN, lse_max = kNaN;
  double o_predicted = kNaN, lse_predicted = kNaN;  // mean squares too
};

struct TrialErrors {
  Errors total, inputs, kernel;
  double nonfinite_rows = 0, score_rms = 0;
};

// Sums of the squared first-order errors over a trial's rows (above).
struct Predicted {
  double inputs_o = 0, inputs_lse = 0, kernel_o = 0, kernel_lse = 0;
};

Predicted predict(const Shape& s, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, const ReferenceResult& ref, double c,
                  const StoredFormats& f) {
  // A tensor kept in fp32 costs nothing to store: its inputs are fp32 already. A format with a
  // scale per row (int8) has no relative error: its terms are row_var's, below.
  const auto stored_u = [](const NumberFormat& x) {
    return x.unit_roundoff == kU32 || x.round_rows ? 0.0 : x.unit_roundoff;
  };
  // Such a format moves each element of a row x by an error uniform in [-sigma/2, sigma/2],
  // sigma = max|x| / 127, but the largest, which is exact (+-127 sigma): E[d^2] = sigma^2 / 12
  // (n - 1) / n on average over the row's n elements (in place of w u^2 x^2); over kW, as every
  // term is multiplied by it at the end. 0 for a per-value format.
  const auto row_var = [](const NumberFormat& x, const double* row, std::int64_t n) {
    if (!x.round_rows) return 0.0;
    double m = 0;
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(row[i]));
    return std::pow(m / 127, 2) / 12 * double(n - 1) / double(n) / kW;
  };
  const double uq2 = std::pow(stored_u(f.q), 2), uk2 = std::pow(stored_u(f.k), 2),
               uv2 = std::pow(stored_u(f.v), 2), up2 = std::pow(stored_u(f.p), 2);
  const double u2 = kU32 * kU32;
  const std::int64_t n = s.n_kv, dk = s.d_k, dv = s.d_v;
  Predicted out;
  std::vector<double> sc(n), p(n), a(n), kbar(dk), cmat(dk * dv), partial(dv), ak(n), vv(n);
  for (std::int64_t j = 0; j < n; ++j) vv[j] = double(dv) * row_var(f.v, &v[j * dv], dv);
  for (std::int64_t r = 0; r < s.n_q; ++r) {
    const double* qr = &q[r * dk];
    const double* o = &ref.out[r * dv];
    double q2 = 0;  // for a format with row scales: c^2 |q|^2 E[dk^2] is key j's score variance
    for (std::int64_t i = 0; i < dk; ++i) q2 += qr[i] * qr[i];
    for (std::int64_t j = 0; j < n; ++j) ak[j] = c * c * q2 * row_var(f.k, &k[j * dk], dk);
    const double vq = row_var(f.q, qr, dk);
    double m = -INFINITY;
    for (std::int64_t j = 0; j < n; ++j) {
      double dot = 0, sq = 0;
      for (std::int64_t i = 0; i < dk; ++i) {
        dot += qr[i] * k[j * dk + i];
        sq += qr[i] * qr[i] * k[j * dk + i] * k[j * dk + i];
      }
      sc[j] = c * dot, a[j] = c * c * sq, m = std::max(m, sc[j]);
    }
    // The largest score's weight is e^0 = 1 when its key is reached (the running max is then
    // its own score), exact in any format: its P rounding is none.
    const std::int64_t top = std::max_element(sc.begin(), sc.end()) - sc.begin();
    double l = 0;
    for (std::int64_t j = 0; j < n; ++j) l += p[j] = std::exp(sc[j] - m);
    std::fill(kbar.begin(), kbar.end(), 0.0);
    std::fill(cmat.begin(), cmat.end(), 0.0);
    std::fill(partial.begin(), partial.end(), 0.0);
    double in_lse = 0, in_o = 0, ker_lse = 0, ker_o = 0, cum = 0, cum2 = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] /= l;
      const double* vj = &v[j * dv];
      const double* kj = &k[j * dk];
      double dist2 = 0, norm2 = 0;
      for (std::int64_t x = 0; x < dv; ++x) {
        dist2 += (vj[x] - o[x]) * (vj[x] - o[x]), norm2 += vj[x] * vj[x];
        partial[x] += p[j] * vj[x];
        ker_o += u2 * partial[x] * partial[x];
      }
      for (std::int64_t i = 0; i < dk; ++i) {
        kbar[i] += p[j] * kj[i];
        for (std::int64_t x = 0; x < dv; ++x) cmat[i * dv + x] += p[j] * kj[i] * (vj[x] - o[x]);
      }
      const double pp = p[j] * p[j];
      in_lse += uk2 * pp * a[j];
      in_o += uk2 * pp * a[j] * dist2 + uv2 * pp * norm2;
      if (f.k.round_rows) in_lse += pp * ak[j], in_o += pp * ak[j] * dist2;
      if (f.v.round_rows) in_o += pp * vv[j];
      const double score_fp32 =
          u2 * (a[j] * double(dk) / 2 + sc[j] * sc[j] + (sc[j] - m) * (sc[j] - m) + 1);
      ker_lse += pp * score_fp32;
      ker_o += pp * (score_fp32 * dist2 + (j == top ? 0.0 : up2 * norm2));
      cum += p[j];
      cum2 += u2 * cum * cum;  // the normaliser's partial sums, relative to it
    }
    double o2 = 0;
    for (std::int64_t x = 0; x < dv; ++x) o2 += o[x] * o[x];
    for (std::int64_t i = 0; i < dk; ++i) {
      double ci2 = 0;
      for (std::int64_t x = 0; x < dv; ++x) ci2 += cmat[i * dv + x] * cmat[i * dv + x];
      in_lse += uq2 * c * c * qr[i] * qr[i] * kbar[i] * kbar[i];
      in_o += uq2 * c * c * qr[i] * qr[i] * ci2;
      if (f.q.round_rows) in_lse += c * c * vq * kbar[i] * kbar[i], in_o += c * c * vq * ci2;
    }
    const double lse = ref.lse[r];
    out.inputs_lse += kW * in_lse;
    out.inputs_o += kW * in_o;
    out.kernel_lse += kW * (ker_lse + cum2 + u2 * lse * lse);
    out.kernel_o += kW * (ker_o + cum2 * o2);
  }
  return out;
}

// Errors of (out, lse) against (ref_out, ref_lse) over the rows `use` marks.
Errors compare(const Shape& s, const std::vector<double>& out, const std::vector<double>& lse,
               const ReferenceResult& ref, const std::vector<bool>& use) {
  double d2 = 0, r2 = 0, dmax = 0, rmax = 0, l2 = 0, lmax = 0;
  std::int64_t rows = 0;
  for (std::int64_t r = 0; r < s.n_q; ++r) {
    if (!use[r]) continue;
    ++rows;
    for (std::int64_t x = r * s.d_v; x < (r + 1) * s.d_v; ++x) {
      const double d = std::abs(out[x] - ref.out[x]);
      d2 += d * d, r2 += ref.out[x] * ref.out[x];
      dmax = std::max(dmax, d), rmax = std::max(rmax, std::abs(ref.out[x]));
    }
    const double dl = std::abs(lse[r] - ref.lse[r]);
    l2 += dl * dl, lmax = std::max(lmax, dl);
  }
  Errors e;
  if (rows == 0) return e;
  e.o_ms = d2 / r2, e.o_max = dmax / rmax;
  e.lse_ms = l2 / double(rows), e.lse_max = lmax;
  return e;
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// x in rows of d rounded to f.
std::vector<double> rounded(const std::vector<float>& x, std::int64_t d, const NumberFormat& f) {
  if (f.round_rows) {
    std::vector<float> y(x.size());
    f.round_rows(x.data(), std::int64_t(x.size()) / d, d, y.data());
    return widen(y);
  }
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f.round(x[i]);
  return y;
}

TrialErrors run_trial(const AttentionCell& c, const Kernel& kernel, const StreamKey& key) {
  PhiloxStream rng(key);
  const Shape shape{1, c.n_q, c.n_kv, c.d_k, c.d_k};
  std::vector<float> q(shape.q_elements()), k(shape.k_elements()), v(shape.v_elements());
  c.inputs.sample(rng, c.n_q, c.n_kv, c.d_k, q, k);
  fill_normal(rng, std::span<float>(v));
  std::vector<float> out(shape.out_elements()), lse(shape.rows());
  // The kernel receives the scale in fp32: the references use that value, so the scale's own
  // rounding is not counted as an error of the kernel.
  const float scale = float(c.scale);
  kernel.forward({.shape = shape,
                  .q = q.data(),
                  .k = k.data(),
                  .v = v.data(),
                  .out = out.data(),
                  .lse = lse.data(),
                  .scale = scale});

  TrialErrors t;
  std::vector<bool> finite(shape.rows(), true), all(shape.rows(), true);
  for (std::int64_t r = 0; r < shape.rows(); ++r) {
    finite[r] = std::isfinite(lse[r]);
    for (std::int64_t x = r * shape.d_v; x < (r + 1) * shape.d_v; ++x)
      finite[r] = finite[r] && std::isfinite(out[x]);
    t.nonfinite_rows += finite[r] ? 0 : 1;
  }
  t.nonfinite_rows /= double(shape.rows());
  const auto qd = widen(q), kd = widen(k), vd = widen(v), got = widen(out), got_lse = widen(lse);
  const auto ref = reference_attention(shape, qd, kd, vd, scale, Mask::full());
  t.total = compare(shape, got, got_lse, ref, finite);
  double score2 = 0;
  for (std::int64_t r = 0; r < shape.rows(); ++r)
    for (std::int64_t j = 0; j < shape.n_kv; ++j) {
      double dot = 0;
      for (std::int64_t i = 0; i < shape.d_k; ++i) dot += qd[r * c.d_k + i] * kd[j * c.d_k + i];
      score2 += std::pow(double(scale) * dot, 2);
    }
  t.score_rms = std::sqrt(score2 / double(shape.rows() * shape.n_kv));

  const StoredFormats* f = stored_formats(kernel.precision);
  if (!f) return t;  // a storage that is not a rounding per value: the total only
  const auto stored = reference_attention(shape, rounded(q, c.d_k, f->q), rounded(k, c.d_k, f->k),
                                          rounded(v, c.d_k, f->v), scale, Mask::full());
  t.inputs = compare(shape, stored.out, stored.lse, ref, all);
  t.kernel = compare(shape, got, got_lse, stored, finite);
  const Predicted p = predict(shape, qd, kd, vd, ref, scale, *f);
  double o2 = 0;
  for (const double o : ref.out) o2 += o * o;
  const double rows = double(shape.rows());
  t.inputs.o_predicted = p.inputs_o / o2;
  t.inputs.lse_predicted = p.inputs_lse / rows;
  t.kernel.o_predicted = p.kernel_o / o2;
  t.kernel.lse_predicted = p.kernel_lse / rows;
  // The two parts are independent to first order: their variances add.
  t.total.o_predicted = (p.inputs_o + p.kernel_o) / o2;
  t.total.lse_predicted = (p.inputs_lse + p.kernel_lse) / rows;
  return t;
}

// One statistic over trials: its mean and CI.
json statistic(const std::vector<TrialErrors>& trials, Errors TrialErrors::*part,
               double Errors::*field) {
  std::vector<double> x;
  x.reserve(trials.size());
  for (const auto& t : trials) x.push_back(t.*part.*field);
  return summary(x);
}

// An RMS error over trials: the root of the mean square, its CI the roots of the mean square's
// (sqrt is monotone), beside the root of the mean predicted square.
json rms_statistic(const std::vector<TrialErrors>& trials, Errors TrialErrors::*part,
                   double Errors::*field, double Errors::*prediction) {
  std::vector<double> x, predicted;
  x.reserve(trials.size()), predicted.reserve(trials.size());
  for (const auto& t : trials) {
    x.push_back(t.*part.*field);
    predicted.push_back(t.*part.*prediction);
  }
  const auto ci = stats::mean_ci(x);
  const auto root = [](double v) { return std::sqrt(std::max(0.0, v)); };
  const double p = stats::mean(predicted);
  return measured(root(stats::mean(x)), {root(ci.low), root(ci.high)},
                  std::isnan(p) ? std::nullopt : std::optional(root(p)), "approximate");
}

json errors_of(const std::vector<TrialErrors>& trials, Errors TrialErrors::*part) {
  if (std::isnan((trials.front().*part).o_predicted) && part != &TrialErrors::total)
    return nullptr;  // no split for this precision
  return {{"o_rms", rms_statistic(trials, part, &Errors::o_ms, &Errors::o_predicted)},
          {"o_max", statistic(trials, part, &Errors::o_max)},
          {"lse_rms", rms_statistic(trials, part, &Errors::lse_ms, &Errors::lse_predicted)},
          {"lse_max", statistic(trials, part, &Errors::lse_max)}};
}

json run_precision_cell(const CellContext& ctx) {
  const AttentionCell c(ctx.cell.params);
  const Kernel& kernel = *find_kernel(c.kernel);
  const auto trials = run_trials<TrialErrors>(
      ctx, c.trials, [&](const StreamKey& key) { return run_trial(c, kernel, key); });
  json r;
  r["precision"] = kernel.precision;
  // The coarsest format's unit roundoff: what "within a few u" is measured in.
  if (const StoredFormats* f = stored_formats(kernel.precision))
    r["unit_roundoff"] =
        std::max({f->q.unit_roundoff, f->k.unit_roundoff, f->v.unit_roundoff, f->p.unit_roundoff});
  r["scale_value"] = c.scale;
  r["score_rms"] = summary(column(trials, &TrialErrors::score_rms));
  r["error"] = {{"total", errors_of(trials, &TrialErrors::total)},
                {"inputs", errors_of(trials, &TrialErrors::inputs)},
                {"kernel", errors_of(trials, &TrialErrors::kernel)}};
  r["nonfinite_rows"] = stats::mean(column(trials, &TrialErrors::nonfinite_rows));
  return r;
}

// Beyond attention_cell_problem (fp32's range): the entries inside the largest finite value of
// every format the kernel stores them in (Q, K: |mean| + 10 sd as there; V ~ N(0, 1): 10).
std::string precision_cell_problem(const json& params, const json& cell) {
  if (std::string p = attention_cell_problem(params, cell); !p.empty()) return p;
  const AttentionCell c(cell);
  const StoredFormats* f = stored_formats(find_kernel(c.kernel)->precision);
  if (!f) return "";
  const auto m = c.model();
  const struct {
    const char* tensor;
    const NumberFormat& format;
    double bound;
  } tensors[] = {{"Q", f->q, std::abs(m.mean_q) + 10 * m.std_q},
                 {"K", f->k, std::abs(m.mean_k) + 10 * m.std_k},
                 {"V", f->v, 10.0}};
  for (const auto& t : tensors)
    if (t.bound > t.format.max_finite) {
      char what[256];
      std::snprintf(what, sizeof what,
                    ": kernel \"%s\" stores %s in %s (largest %.4g), whose entries reach about "
                    "%.3g (|mean| + 10 sd) and would round to infinity; reduce the means or "
                    "standard deviations",
                    c.kernel.c_str(), t.tensor, t.format.name, t.format.max_finite, t.bound);
      return cell_path(params, cell, "kernel") + what;
    }
  return "";
}

}  // namespace

ExperimentKind precision_experiment() {
  return {
      .name = "precision",
      .description =
          "error of O and lse against fp64 per kernel precision, d_k, N, scale and "
          "input scale: rounding the inputs vs the kernel's arithmetic, and predicted",
      .axes = AttentionCell::kAxes,
      .run_cell = run_precision_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const AttentionCell c(p);
            // Per trial, beside Q, K, W and the workspace: V, O and lse in fp32; Q, K, V, the
            // output and lse in double, rounded, twice referenced; the prediction's d_k x d_k
            // matrix and rows of n_kv.
            const double nq = double(c.n_q), nkv = double(c.n_kv), d = double(c.d_k);
            // The workspace with d_v = d_k (forward_trial_bytes counts it with d_v = 1).
            const double own =
                4.0 * (nkv * d + nq * d + nq) + 8.0 * 2 * (nq + 2 * nkv) * d +
                8.0 * 3 * (nq * d + nq) + 8.0 * (d * d + 3 * nkv + 2 * d) +
                kernel_workspace(p, {1, c.n_q, c.n_kv, c.d_k, c.d_k}, Pass::forward, 1);
            return trials_memory(c.forward_trial_bytes(own), double(sizeof(TrialErrors)), c.trials,
                                 threads);
          },
      .check = nullptr,
      .cell_check = precision_cell_problem,
  };
}

}  // namespace sdpa
