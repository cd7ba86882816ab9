// The int8 dots of AVX512BW, AVX2 and SSSE3 for int8_dots_vec-inl.h, over the vector operations
// `Vec` of the including namespace (Zmm, Ymm, Xmm in int8_dots_x86.cpp): (v)pmaddubsw multiplies
// unsigned by signed bytes, so |k| times q with k's sign, as llama.cpp's AVX2 q8_0 dot does. Each
// int16 sum is |k0| s0 + |k1| s1 with |k|, |s| <= 127, at most 2 * 127 * 127 = 32258 < 32767: it
// never saturates. Included inside each instruction set's target region, as int8_dots_vec-inl.h is.
// No include guard: each inclusion is a copy in its own namespace.

struct Dot : Vec {
  static constexpr std::int32_t kOffset = 0;
  static constexpr bool kTwoChains = false;  // a chain step is one (v)paddd
  struct Keys {
    Vec::I magnitude, sign;
  };
  static Keys keys(Vec::I k) { return {Vec::abs8(k), k}; }
  static Vec::I add(Vec::I acc, Keys k, Vec::I q) {
    return Vec::sum(acc, Vec::quads(Vec::pairs(k.magnitude, Vec::sign8(q, k.sign))));
  }
};
