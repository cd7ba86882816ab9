// The "eigen" peer, as an Eigen user writes attention: Map the row-major tensors, S = s Q K^T,
// row softmax with max subtraction, O = P V. Materialises the scores of one K/V head at a time
// (fine for a library peer; flash exists to avoid it): the query rows of its group's heads are
// stacked into one product, and the scores live in the caller's cached scratch. Eigen's GEMM
// threads through Eigen::setNbThreads.
//
// Compiled once per instruction set (CMake: SDPA_EIGEN_ISA with -mavx2 -mfma, or AVX-512
// flags), since Eigen picks its packets at compile time and a baseline-SSE2 Eigen would be an
// unfair peer. CMake also renames Eigen's namespace per copy (-DEigen=Eigen_<isa>) and this file
// uses no inline code it shares with other translation units, so the linker cannot merge an
// AVX-512 copy of some function into code that must run on a lesser CPU.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sdpa/kernels.hpp"

#define SDPA_CAT2(a, b) a##b
#define SDPA_CAT(a, b) SDPA_CAT2(a, b)

namespace sdpa::detail {

// The baseline unit's row steps (eigen.cpp): a row's logits in place (returns its keys and
// sink), and its probes.
struct EigenRowHooks {
  KeyRange (*logits)(const ForwardArgs&, std::int64_t row, float* scores, float& sink);
  void (*probe)(const ForwardArgs&, std::int64_t row, const float* scores, std::int64_t n,
                float sink);  // null: no probes
};

// scratch: rows x n_kv scores, then shift, l, 1/l, the sink and the lse of an empty row (rows
// each), rows = group x n_q
// (eigen.cpp's eigen_workspace_floats).
void SDPA_CAT(eigen_forward_, SDPA_EIGEN_ISA)(const ForwardArgs& a, const EigenRowHooks& hooks,
                                              float* scratch) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix>;
  using VectorMap = Eigen::Map<Eigen::VectorXf>;
  const Shape& s = a.shape;
  const std::int64_t rows = s.group * s.n_q;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Eigen::setNbThreads(a.threads);
  Eigen::Map<Matrix> scores(scratch, rows, s.n_kv);
  VectorMap shift(scratch + rows * s.n_kv, rows), l(shift.data() + rows, rows),
      inv(l.data() + rows, rows), sink(inv.data() + rows, rows),
      lse_empty(sink.data() + rows, rows);
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv) {
    const ConstMap q(a.q + kv * rows * s.d_k, rows, s.d_k);
    const ConstMap k(a.k + kv * s.n_kv * s.d_k, s.n_kv, s.d_k);
    const ConstMap v(a.v + kv * s.n_kv * s.d_v, s.n_kv, s.d_v);
    Eigen::Map<Matrix> out(a.out + kv * rows * s.d_v, rows, s.d_v);

    scores.noalias() = a.scale * (q * k.transpose());
    for (std::int64_t i = 0; i < rows; ++i) {
      float sink_i;
      const KeyRange keys = hooks.logits(a, kv * rows + i, scores.row(i).data(), sink_i);
      // No inline helper shared with other units (KeyRange::size, std::max): see above.
      const std::int64_t n = keys.end > keys.begin ? keys.end - keys.begin : 0;
      if (hooks.probe) hooks.probe(a, kv * rows + i, scores.row(i).data() + keys.begin, n, sink_i);
      sink(i) = n ? sink_i : -kInf;
      // e^-inf = 0: a row that sees no key sums to 0.
      const float m = n ? scores.row(i).segment(keys.begin, n).maxCoeff() : 0.0f;
      shift(i) = n ? (sink_i > m ? sink_i : m) : 0.0f;
      lse_empty(i) = sink_i;
    }
    scores = (scores.colwise() - shift).array().exp();
    l = scores.rowwise().sum() + (sink - shift).array().exp().matrix();
    out.noalias() = scores * v;
    inv = (l.array() > 0).select(l.cwiseInverse(), 0.0f);
    out = inv.asDiagonal() * out;
    if (a.lse)
      for (std::int64_t i = 0; i < rows; ++i)
        a.lse[kv * rows + i] = l(i) > 0 ? shift(i) + std::log(l(i)) : lse_empty(i);
  }
}

}  // namespace sdpa::detail
