// The number formats of the kernels' precisions (sdpa/precision.hpp). bf16 rounds as the bf16
// kernels do (bf16.hpp: subnormals to zero, as vcvtneps2bf16); fp16 as F16C's vcvtps2ph with
// round-to-nearest-even, subnormals kept; int8 per row as flash-kv-int8 does (kv_int8.hpp).
#include "sdpa/precision.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "bf16.hpp"
#include "kv_formats.hpp"
#include "kv_int8.hpp"

namespace sdpa {
namespace {

float fp32_round(float x) { return x; }

constexpr double kBf16Max = 3.3895313892515355e38;  // (2 - 2^-7) 2^127

const NumberFormat kFp32{"fp32", 0x1p-24, FLT_MAX, &fp32_round};
const NumberFormat kBf16{"bf16", 0x1p-8, kBf16Max, &detail::bf16_round};
const NumberFormat kFp16{"fp16", 0x1p-11, 65504.0, &sdpa::fp16_round};
void int8_round_rows(const float* x, std::int64_t rows, std::int64_t d, float* y) {
  detail::int8_round_rows(x, rows, d, y);
}
const NumberFormat kInt8{"int8", 1.0 / 254, FLT_MAX, nullptr, &int8_round_rows};

}  // namespace

float fp16_round(float x) { return detail::f16_to_f32(detail::f16_bits(x)); }

const StoredFormats* stored_formats(std::string_view precision) {
  static const StoredFormats fp32{kFp32, kFp32, kFp32, kFp32};
  static const StoredFormats bf16{kBf16, kBf16, kBf16, kBf16};
  static const StoredFormats bf16_kv{kFp32, kBf16, kBf16, kFp32};
  static const StoredFormats fp16_kv{kFp32, kFp16, kFp16, kFp32};
  if (precision == "fp32") return &fp32;
  if (precision == "bf16") return &bf16;
  if (precision == "kv-bf16") return &bf16_kv;
  if (precision == "kv-fp16") return &fp16_kv;
  // flash-kv-int8 rounds Q per row at the call as it stores K and V (flash_kv_int8.cpp).
  static const StoredFormats int8_kv{kInt8, kInt8, kInt8, kFp32};
  if (precision == "kv-int8") return &int8_kv;
  return nullptr;
}

}  // namespace sdpa
