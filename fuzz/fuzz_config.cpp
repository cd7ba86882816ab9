// libFuzzer target: any bytes as a config. Loading and validating either succeeds (and the
// plan expands) or throws InputError; anything else (another exception, a crash, a sanitizer
// report, a leak, running out of memory or time) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sdpa/experiments.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sdpa::Config config = sdpa::parse_config("fuzz.json", text);
    (void)sdpa::make_plan(config);
  } catch (const sdpa::InputError&) {
  }
  return 0;
}
