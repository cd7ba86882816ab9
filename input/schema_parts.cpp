#include "sdpa/schema_parts.hpp"

#include <stdexcept>

namespace sdpa {

json assemble_schema(const char* base, std::span<const SchemaText> parts, const std::string& suffix,
                     const std::string& dispatch,
                     const std::function<json(const std::string& ref)>& then,
                     const std::string& comment) {
  json schema = json::parse(base);
  schema["$comment"] = comment;
  json& definitions = schema["definitions"];
  const auto define = [&](const std::string& name, json value) {
    if (definitions.contains(name))
      throw std::logic_error("schema definition \"" + name + "\" is given twice");
    definitions[name] = std::move(value);
  };
  for (const SchemaText& part : parts) {
    json definition = json::parse(part.text);
    if (definition.contains("definitions")) {
      for (auto& [name, value] : definition["definitions"].items()) define(name, value);
      definition.erase("definitions");
    }
    const std::string name = part.kind + suffix;
    define(name, std::move(definition));
    definitions[dispatch]["allOf"].push_back(
        {{"if", {{"properties", {{"kind", {{"const", part.kind}}}}}, {"required", {"kind"}}}},
         {"then", then("#/definitions/" + name)}});
  }
  return schema;
}

}  // namespace sdpa
