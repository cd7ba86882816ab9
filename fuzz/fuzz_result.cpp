// libFuzzer target: any bytes as a result file, then its tables. Reading either succeeds and
// every table can be made, or throws InputError naming the file (and the JSON path). A file
// that results/schema.json admits but the tables cannot use is a bug in the schema or the
// tables, so the reader's last-resort "cannot be tabulated" refusal counts as a crash here.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sdpa/input_error.hpp"
#include "sdpa/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sdpa::json doc = sdpa::report::parse_result_file("fuzz.json", text);
    (void)sdpa::report::markdown(sdpa::report::tables({doc, doc}));
  } catch (const sdpa::InputError& e) {
    if (std::string(e.what()).find("cannot be tabulated") != std::string::npos) std::abort();
  }
  return 0;
}
