#include "kv_formats.hpp"

#include <stdexcept>

namespace sdpa::detail {
namespace {

void round_into(const float* x, std::int64_t n, KvFormat format, std::uint16_t* y, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = format == KvFormat::kF16 ? f16_bits(x[i]) : bf16_bits(x[i]);
}

}  // namespace

std::unique_ptr<StoredKv> store_kv16(const ForwardArgs& a, KvFormat format) {
  auto stored = std::make_unique<StoredKv16>();
  stored->format = format;
  stored->shape = a.shape;
  stored->k.resize(std::size_t(a.shape.k_elements()));
  stored->v.resize(std::size_t(a.shape.v_elements()));
  round_into(a.k, a.shape.k_elements(), format, stored->k.data(), a.threads);
  round_into(a.v, a.shape.v_elements(), format, stored->v.data(), a.threads);
  return stored;
}

const StoredKv16& stored_kv16(const ForwardArgs& a, KvFormat format,
                              std::unique_ptr<StoredKv>& own) {
  if (!a.stored_kv) {
    own = store_kv16(a, format);
    return static_cast<const StoredKv16&>(*own);
  }
  const auto* stored = dynamic_cast<const StoredKv16*>(a.stored_kv);
  if (!stored || stored->format != format || !same_kv_shape(stored->shape, a.shape))
    throw std::invalid_argument("stored K/V of another format or shape than the call's");
  return *stored;
}

}  // namespace sdpa::detail
