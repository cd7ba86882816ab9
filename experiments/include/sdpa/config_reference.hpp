// docs/configs.md, the reference of every config parameter, written from the assembled config
// schema (the kinds' parts, kinds/*/config.schema.json) so that it cannot drift from what
// sdpa-bench checks: `make schemas` writes it, tests/test_kinds.cpp fails while it is stale.
#pragma once

#include <string>

namespace sdpa {

// The Markdown of docs/configs.md.
std::string config_reference_markdown();

}  // namespace sdpa
