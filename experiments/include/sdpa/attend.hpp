// `sdpa-bench attend`: one kernel on NumPy arrays, so a user can check our kernels against
// their framework. Q (n_q, d_k), K (n_kv, d_k), V (n_kv, d_v) as .npy float32, with a leading
// batch*heads dimension, or with leading (batch, heads) dimensions where K and V may have fewer
// heads than Q (grouped-query attention: heads_q a multiple of heads_kv); writes O (and the row
// log-sum-exp), and given the upstream gradient dO, also dQ, dK, dV, each shaped like its
// counterpart (dK and dV summed over each K/V head's group of query heads).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sdpa {

struct AttendOptions {
  std::string q, k, v;   // input .npy files
  std::string grad_out;  // optional dO .npy: also compute dQ, dK, dV
  std::string out;       // output folder: o.npy, lse.npy [, dq.npy, dk.npy, dv.npy]
  std::string kernel = "flash";
  std::optional<double> scale;  // default 1/sqrt(d_k)
  bool causal = false;
  int threads = 1;
};

// Runs it and returns the files written. Throws InputError naming the file and what was
// expected for arrays whose shapes do not fit together (batch, d_k, n_kv, d_v, or heads_q not a
// multiple of heads_kv), an unknown kernel, or a kernel without
// a backward when dO is given.
std::vector<std::string> attend(const AttendOptions& options);

}  // namespace sdpa
