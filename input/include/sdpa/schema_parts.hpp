// JSON Schemas assembled from parts: a base schema (what every experiment kind shares) and, per
// kind, the part that describes that kind's objects (kinds/<kind>/config.schema.json and
// record.schema.json). CMake embeds the texts in the order of kinds/kinds.cmake; assembling
// them the same way every time gives the schemas sdpa-bench checks against, which a test
// compares with the committed configs/schema.json and results/schema.json.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "sdpa/json.hpp"

namespace sdpa {

// One kind's part of a schema, as shipped.
struct SchemaText {
  const char* kind;
  const char* text;
};

// `base` with every part added: a part becomes definitions[<kind><suffix>], its own
// "definitions" (types only that kind uses) moved up beside the base's; and
// definitions[dispatch]["allOf"] gets one branch per kind,
//   {"if": {"properties": {"kind": {"const": <kind>}}, "required": ["kind"]},
//    "then": then(<"#/definitions/<kind><suffix>">)}.
// The base's "$comment" (which says how it is assembled) becomes `comment`. A part that is not
// JSON, or a definition name given twice, is a programming error (std::logic_error).
json assemble_schema(const char* base, std::span<const SchemaText> parts, const std::string& suffix,
                     const std::string& dispatch,
                     const std::function<json(const std::string& ref)>& then,
                     const std::string& comment);

}  // namespace sdpa
