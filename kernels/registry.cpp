#include <algorithm>

#include "decode_blocks.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"

namespace sdpa {

void RowProbes::resize(std::int64_t rows) {
  score_sum.assign(rows, 0.0);
  score_sumsq.assign(rows, 0.0);
  entropy.assign(rows, 0.0);
  max_weight.assign(rows, 0.0);
  sum_p2.assign(rows, 0.0);
  sum_p3.assign(rows, 0.0);
  nonfinite.assign(rows, 0);
}

void GradProbes::resize(std::int64_t rows) {
  ds_sumsq.assign(rows, 0.0);
  ds_max_abs.assign(rows, 0.0);
  participating.assign(rows, 0);
  visible.assign(rows, 0);
}

RowProbes::Pooled RowProbes::pooled() const {
  Pooled p;
  p.rows = static_cast<std::int64_t>(entropy.size());
  for (std::int64_t r = 0; r < p.rows; ++r) {
    p.score_sum += score_sum[r];
    p.score_sumsq += score_sumsq[r];
    p.entropy_mean += entropy[r];
    p.max_weight_mean += max_weight[r];
    p.nonfinite += nonfinite[r];
    p.nonfinite_rows += nonfinite[r] > 0 ? 1 : 0;
  }
  if (p.rows > 0) {
    p.entropy_mean /= double(p.rows);
    p.max_weight_mean /= double(p.rows);
  }
  return p;
}

const std::vector<Kernel>& kernel_registry() {
  static const std::vector<Kernel> registry = [] {
    std::vector<Kernel> all;
    // Ladder order: the oracle, then each rung, then the library peers.
    for (auto&& family :
         {detail::reference_kernels(), detail::naive_kernels(), detail::blocked_kernels(),
          detail::simd_kernels(), detail::flash_kernels(), detail::flash_bf16_kernels(),
          detail::flash_kv_kernels(), detail::flash_kv_int8_kernels(), detail::eigen_kernels(),
          detail::blas_kernels(), detail::ggml_kernels()})
      all.insert(all.end(), family.begin(), family.end());
    return all;
  }();
  return registry;
}

std::string Kernel::roof_isa() const { return peak::roof_isa(product_isa()); }

Kernel::Roofs Kernel::roofs(const Shape& shape) const {
  const double share = double(shape.d_k) / double(shape.d_k + shape.d_v);
  if (fp32_isa.empty()) return {roof_isa(), roof_isa(), share};
  const std::string fp32 = peak::roof_isa(fp32_isa);
  return {detail::is_decode_shape(shape) ? roof_isa() : fp32, fp32, share};
}

double Kernel::Roofs::peak(double scores_gflops, double values_gflops) const {
  return values == scores ? scores_gflops
                          : peak::mixed_peak(scores_gflops, values_gflops, scores_share);
}

std::vector<std::string> Kernel::roof_isas() const {
  std::vector<std::string> out;
  for (const std::string& isa : {roof_isa(), peak::roof_isa(fp32_isa)})
    if (!isa.empty() && std::find(out.begin(), out.end(), isa) == out.end()) out.push_back(isa);
  return out;
}

const Kernel* find_kernel(std::string_view name) {
  const auto& reg = kernel_registry();
  auto it = std::find_if(reg.begin(), reg.end(), [&](const Kernel& k) { return k.name == name; });
  return it == reg.end() ? nullptr : &*it;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& k : kernel_registry()) names.push_back(k.name);
  return names;
}

std::optional<std::string> kernel_elsewhere(std::string_view name) {
  if (find_kernel(name)) return std::nullopt;
  static const std::vector<detail::AbsentKernel> absent = detail::ggml_absent_kernels();
  for (const auto& a : absent)
    if (a.name == name) return "this build has no " + a.name + ": " + a.why;
  const auto at = name.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  const auto family = name.substr(0, at), isa = name.substr(at + 1);
  const auto& isas = peak::known_isas();
  const auto& reg = kernel_registry();
  if (std::find(isas.begin(), isas.end(), isa) == isas.end() ||
      std::none_of(reg.begin(), reg.end(), [&](const Kernel& k) { return k.family == family; }))
    return std::nullopt;
  return "this CPU or build has no " + std::string(name);
}

double forward_flops(const Shape& s, const Mask& mask) {
  // Q K^T costs 2 d_k and P V 2 d_v multiply-adds per visible (query, key) pair: every pair
  // without a mask; with the causal one (aligned to the end) row i sees n_kv - n_q + i + 1 keys,
  // so a decode query is credited with the whole cache rather than half of it.
  return double(s.batch_heads) * visible_pairs(s, mask) * 2.0 * double(s.d_k + s.d_v);
}

double forward_bytes(const Shape& s, const Mask& mask, double kv_element_bytes,
                     double kv_row_bytes) {
  const double kv_rows = double(s.kv_batch_heads()) * double(visible_keys_union(s, mask));
  return sizeof(float) * double(s.q_elements() + s.out_elements()) +
         kv_element_bytes * kv_rows * double(s.d_k + s.d_v) + kv_row_bytes * 2.0 * kv_rows;
}

}  // namespace sdpa
