// libFuzzer target: any bytes as a .npy file. Parsing either succeeds or throws InputError;
// what it reads must survive a write and a read unchanged, bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "sdpa/input_error.hpp"
#include "sdpa/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto a = sdpa::npy::parse("fuzz.npy", {reinterpret_cast<const char*>(data), size});
    const auto b = sdpa::npy::parse("again.npy", sdpa::npy::serialize(a));
    if (a.shape != b.shape || a.data.size() != b.data.size()) std::abort();
    if (!a.data.empty() &&  // (memcmp on an empty vector's null data() is undefined)
        std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) != 0)
      std::abort();
  } catch (const sdpa::InputError&) {
  }
  return 0;
}
