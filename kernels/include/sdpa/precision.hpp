// How a kernel's precision (Kernel::precision) stores what it computes with: the number format of
// Q, K, V and of the attention weights P before P V, each with its rounding, unit roundoff and
// largest finite value (docs/design.md, "Conventions for inference shapes and precision").
// The precision experiment reads it to split a kernel's error into what rounding its inputs
// costs and what its arithmetic adds; `attend` to refuse inputs a format cannot hold.
#pragma once

#include <cstdint>
#include <string_view>

namespace sdpa {

struct NumberFormat {
  const char* name;       // "fp32", "bf16", "fp16", "int8"
  double unit_roundoff;   // u = 2^-p for p significant bits: 2^-24, 2^-8, 2^-11; int8: 1/254
  double max_finite;      // the largest finite value; larger magnitudes round to infinity
  float (*round)(float);  // to nearest, ties to even (fp32: the identity); null for int8
  // A format with a scale per row (int8: max|x| / 127 of the row, kv_int8.hpp in the kernels)
  // rounds whole rows of d: y = scale x round(x / scale), each element within scale / 2 (its
  // unit_roundoff is that half step relative to the row's largest magnitude). Null otherwise.
  void (*round_rows)(const float* x, std::int64_t rows, std::int64_t d, float* y) = nullptr;
};

struct StoredFormats {
  NumberFormat q, k, v, p;  // fp32 where the precision keeps one in fp32
};

// The formats of a precision: "fp32", "bf16" (Q, K, V and P in bf16), "kv-bf16" and "kv-fp16"
// (K and V narrow, the rest fp32), "kv-int8" (Q, K and V in int8 with a scale per row, i.e. per
// token and head; P fp32). Null for a precision this build does not know.
const StoredFormats* stored_formats(std::string_view precision);

// x rounded to the nearest IEEE binary16 value, ties to even: +-inf from 65520 on (65504 is the
// largest finite), multiples of 2^-24 below 2^-14; NaN stays NaN. The one fp16 rounding of the
// suite: the fp16 K/V storage of flash-kv-f16, the precision kind's formats and the entropy
// kind's half-precision softmax all round with it (exactly, in software, on every CPU).
float fp16_round(float x);

}  // namespace sdpa
