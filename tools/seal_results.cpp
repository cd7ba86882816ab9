// Rewrites result files with the checksum of their contents (contents_sha256, written last), as
// `sdpa-bench run` and `merge` write it: for files written before the checksum existed (the
// committed results/, the fuzz seeds). `make seal` runs it on results/*/*.json:
//   seal_results FILE...
// A file that is not a JSON object is left alone, named; the others keep their contents
// (compact files stay compact).
#include <cstdio>
#include <exception>

#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/report.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s RESULT.json...\n", argv[0]);
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      const std::string text = sdpa::read_input_file(argv[i], "result file");
      const auto doc = sdpa::json::parse(text);
      if (!doc.is_object()) throw std::runtime_error("not a JSON object");
      std::string sealed = sdpa::report::result_file_text(doc);
      // One line in, one line out: a compact file stays compact.
      if (const auto newline = text.find('\n');
          newline == std::string::npos || newline + 1 == text.size())
        sealed = sdpa::json::parse(sealed).dump() + (text.ends_with("\n") ? "\n" : "");
      if (sealed != text) sdpa::write_file_atomically(argv[i], sealed);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "seal_results: %s: left as it is: %s\n", argv[i], e.what());
      status = 1;
    }
  }
  return status;
}
