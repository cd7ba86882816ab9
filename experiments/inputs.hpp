// Input distributions shared by the experiment kinds: how Q and K are drawn, and the moments
// theory needs from them.
//   normal:    q ~ N(mean_q, std_q^2), k ~ N(mean_k, std_k^2), entries i.i.d.
//   aligned:   additionally k_i = rho q_i + sqrt(1 - rho^2) z_i for i < min(n_q, n_kv)
//   projected: q = x W_Q, k = x' W_K with x, x' of unit variance (fresh tokens for queries and
//              keys) and W of shape d_model x d_k drawn per trial with Glorot
//              (normal, variance 2 / (d_model + d_k)) or PyTorch's Linear default
//              (uniform +-1/sqrt(d_model), variance 1 / (3 d_model)).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "sdpa/rng.hpp"
#include "sdpa/theory.hpp"

namespace sdpa {

// W (fan_in x fan_out, row-major) with the chosen initialisation ("glorot" or "pytorch", see
// above), drawn from the stream.
std::vector<double> initial_weights(PhiloxStream& rng, const std::string& init, std::int64_t fan_in,
                                    std::int64_t fan_out);

struct InputSpec {
  std::string kind = "normal";  // "normal" or "projected"
  double mean_q = 0, std_q = 1, mean_k = 0, std_k = 1;
  double alignment = 0;
  std::int64_t d_model = 0;
  std::string init;  // "glorot" or "pytorch" for projected inputs

  // Reads the input parameters of a cell; absent ones keep the defaults above.
  static InputSpec from(const json& params);

  // Draws q [n_q, d_k] and k [n_kv, d_k] from the stream.
  void sample(PhiloxStream& rng, std::int64_t n_q, std::int64_t n_kv, std::int64_t d_k,
              std::span<float> q, std::span<float> k) const;

  // The score model theory uses: per-entry means and standard deviations of q and k.
  theory::ScoreModel score_model(double d_k, double scale, std::int64_t n_q,
                                 std::int64_t n_kv) const;

  // Bytes of W_Q and W_K (in double) a trial of projected inputs draws; none for normal ones.
  double weight_bytes(std::int64_t d_k) const {
    return kind == "projected" ? 16.0 * double(d_model) * double(d_k) : 0.0;
  }

  // Whether scores are i.i.d. across (query, key) pairs with the moments of score_model
  // (false for aligned pairs, whose dot products are shifted).
  bool independent_scores() const { return alignment == 0; }

  // Why inputs drawn so, and their scores c q.k, would leave fp32's range (the kernels'), as
  // "<json path>: <message>", or "" when they stay inside it. Entries are bounded by
  // |mean| + 10 sd (a normal passes it once in 10^23 draws) and a score by d_k times the
  // product of those bounds, so "inside" holds for every draw of an experiment; entries or
  // products below 2^-102 are refused too, since fp32 keeps its 24 bits only above that.
  std::string fp32_problem(double d_k, double scale) const;
};

}  // namespace sdpa
