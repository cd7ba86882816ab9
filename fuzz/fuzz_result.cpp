// libFuzzer target: any bytes as a result file, then its tables. Reading either succeeds and
// every table can be made, or throws InputError naming the file (and the JSON path). A file
// that results/schema.json admits but the tables cannot use is a bug in the schema or the
// tables, so the reader's last-resort "cannot be tabulated" refusal counts as a crash here.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sdpa/input_error.hpp"
#include "sdpa/report.hpp"

namespace {

// "fuzz.json: /experiments/<i>: cannot be tabulated: ...": only the reader's last resort
// starts so (other messages may quote the input, which may hold the same words further on).
bool last_resort(const std::string& message) {
  const std::string head = "fuzz.json: /experiments/", tail = ": cannot be tabulated: ";
  if (message.rfind(head, 0) != 0) return false;
  std::size_t i = head.size();
  while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
  return i > head.size() && message.compare(i, tail.size(), tail) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sdpa::json doc = sdpa::report::parse_result_file("fuzz.json", text);
    (void)sdpa::report::markdown(sdpa::report::tables({doc, doc}));
  } catch (const sdpa::InputError& e) {
    if (last_resort(e.what())) std::abort();
  }
  return 0;
}
