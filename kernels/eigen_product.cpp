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

using EigenRowHook = void (*)(const ForwardArgs&, std::int64_t row, const float* scores,
                              std::int64_t visible);

// scratch: rows x n_kv scores, then shift, l and 1/l (rows each), rows = group x n_q
// (eigen.cpp's eigen_workspace_floats).
void SDPA_CAT(eigen_forward_, SDPA_EIGEN_ISA)(const ForwardArgs& a, EigenRowHook probe_row,
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
      inv(l.data() + rows, rows);
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv) {
    const ConstMap q(a.q + kv * rows * s.d_k, rows, s.d_k);
    const ConstMap k(a.k + kv * s.n_kv * s.d_k, s.n_kv, s.d_k);
    const ConstMap v(a.v + kv * s.n_kv * s.d_v, s.n_kv, s.d_v);
    Eigen::Map<Matrix> out(a.out + kv * rows * s.d_v, rows, s.d_v);

    scores.noalias() = a.scale * (q * k.transpose());
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t visible = a.mask.visible(s, i % s.n_q).end;
      scores.row(i).tail(s.n_kv - visible).setConstant(-kInf);
      if (probe_row) probe_row(a, kv * rows + i, scores.row(i).data(), visible);
      shift(i) = visible ? scores.row(i).head(visible).maxCoeff() : 0.0f;  // e^-inf = 0
    }
    scores = (scores.colwise() - shift).array().exp();
    l = scores.rowwise().sum();
    out.noalias() = scores * v;
    inv = (l.array() > 0).select(l.cwiseInverse(), 0.0f);
    out = inv.asDiagonal() * out;
    if (a.lse)
      for (std::int64_t i = 0; i < rows; ++i)
        a.lse[kv * rows + i] = l(i) > 0 ? shift(i) + std::log(l(i)) : -kInf;
  }
}

}  // namespace sdpa::detail
