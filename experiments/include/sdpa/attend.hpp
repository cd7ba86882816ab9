// `sdpa-bench attend`: one kernel on NumPy arrays, so a user can check our kernels against
// their framework. Q (n_q, d_k), K (n_kv, d_k), V (n_kv, d_v) as .npy float32, with a leading
// batch*heads dimension, or with leading (batch, heads) dimensions where K and V may have fewer
// heads than Q (grouped-query attention: heads_q a multiple of heads_kv); writes O (and the row
// log-sum-exp), and given the upstream gradient dO, also dQ, dK, dV, each shaped like its
// counterpart (dK and dV summed over each K/V head's group of query heads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sdpa {

struct AttendOptions {
  std::string q, k, v;   // input .npy files
  std::string grad_out;  // optional dO .npy: also compute dQ, dK, dV
  std::string out;       // output folder: o.npy, lse.npy [, dq.npy, dk.npy, dv.npy]
  std::string kernel = "flash";
  std::optional<double> scale;  // default 1/sqrt(d_k)
  bool causal = false;
  // Masks and score modifiers (sdpa/mask.hpp), as parsed from the command line: a sliding
  // window (left, right; -1 unbounded on a side), chunks, a prefix-LM's prefix, documents and
  // sinks as .npy files (document start offsets; one sink logit per query head), a soft-cap (0:
  // none) and ALiBi's standard slopes.
  std::optional<std::pair<std::int64_t, std::int64_t>> window;
  std::int64_t chunk = 0, prefix = 0;
  std::string documents, sinks;
  double softcap = 0;
  bool alibi = false;
  int threads = 1;
};

// Runs it and returns the files written (with sinks and dO, also dsinks.npy). Throws InputError
// naming the file and what was expected for arrays whose shapes do not fit together (batch, d_k,
// n_kv, d_v, or heads_q not a multiple of heads_kv), masks or modifiers that cannot apply (named
// by their flag), an unknown kernel, or a kernel without a backward when dO is given.
std::vector<std::string> attend(const AttendOptions& options);

}  // namespace sdpa
