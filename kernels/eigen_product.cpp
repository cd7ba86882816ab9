// The "eigen" peer, as an Eigen user writes attention: Map the row-major tensors, S = s Q K^T,
// row softmax with max subtraction, O = P V. Materialises n_q x n_kv scores per head (fine for a
// library peer; flash exists to avoid it). Eigen's GEMM threads through Eigen::setNbThreads.
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

void SDPA_CAT(eigen_forward_, SDPA_EIGEN_ISA)(const ForwardArgs& a, EigenRowHook probe_row) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix>;
  const Shape& s = a.shape;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Eigen::setNbThreads(a.threads);
  Matrix scores(s.n_q, s.n_kv);
  for (std::int64_t b = 0; b < s.batch_heads; ++b) {
    const ConstMap q(a.q + b * s.n_q * s.d_k, s.n_q, s.d_k);
    const ConstMap k(a.k + b * s.n_kv * s.d_k, s.n_kv, s.d_k);
    const ConstMap v(a.v + b * s.n_kv * s.d_v, s.n_kv, s.d_v);
    Eigen::Map<Matrix> out(a.out + b * s.n_q * s.d_v, s.n_q, s.d_v);

    scores.noalias() = a.scale * (q * k.transpose());
    Eigen::VectorXf shift(s.n_q);
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      const std::int64_t visible = visible_keys(s, a.causal, i);
      scores.row(i).tail(s.n_kv - visible).setConstant(-kInf);
      if (probe_row) probe_row(a, b * s.n_q + i, scores.row(i).data(), visible);
      shift(i) = visible ? scores.row(i).head(visible).maxCoeff() : 0.0f;  // e^-inf = 0
    }
    scores = (scores.colwise() - shift).array().exp();
    const Eigen::VectorXf l = scores.rowwise().sum();
    out.noalias() = scores * v;
    const Eigen::VectorXf inv = (l.array() > 0).select(l.cwiseInverse(), 0.0f);
    out = inv.asDiagonal() * out;
    if (a.lse)
      for (std::int64_t i = 0; i < s.n_q; ++i)
        a.lse[b * s.n_q + i] = l(i) > 0 ? shift(i) + std::log(l(i)) : -kInf;
  }
}

}  // namespace sdpa::detail
