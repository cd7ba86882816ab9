// Writes the schemas sdpa-bench checks against, assembled from kinds/ (config_schema(),
// report::result_schema()), to the files editors and other tools read, and the reference of
// every config parameter written from the first: `make schemas` runs
//   write_schemas configs/schema.json results/schema.json docs/configs.md
// tests/test_kinds.cpp fails while the committed files differ from what this writes.
#include <cstdio>
#include <exception>

#include "sdpa/config_reference.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/report.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s CONFIG_SCHEMA.json RESULT_SCHEMA.json CONFIGS.md\n", argv[0]);
    return 2;
  }
  try {
    sdpa::write_file_atomically(argv[1], sdpa::config_schema().dump(2) + "\n");
    sdpa::write_file_atomically(argv[2], sdpa::report::result_schema().dump(2) + "\n");
    sdpa::write_file_atomically(argv[3], sdpa::config_reference_markdown());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_schemas: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "wrote %s, %s and %s\n", argv[1], argv[2], argv[3]);
  return 0;
}
