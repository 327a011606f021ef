// A YAML subset parser for config files, producing lathe::Json values.
//
// Supported: block mappings and sequences (including "- key: value" items and sequences at the
// same indentation as their key), flow collections on one line ([a, b], {a: 1}), comments, plain,
// 'single' ('' escapes a quote) and "double" quoted scalars (\n \t \" \\ \xXX \uXXXX ...), and the
// YAML 1.2 core schema for plain scalars: null / ~ / empty, true / false, integers, floats (1e-3,
// .5, -2.0, .inf, .nan). Everything else is a string ("yes" stays a string, as in YAML 1.2).
//
// Rejected with "unsupported YAML feature: ...": anchors (&), aliases (*), tags (!), block scalars
// (| >), complex keys (?), directives (%) and multiple documents (a single leading "---" is fine).
// Tabs in indentation, inconsistent indentation, duplicate keys and malformed scalars are errors.
// Every error is a lathe::Error "SOURCE:LINE:COLUMN: what went wrong" (lines and columns from 1).
#pragma once

#include <map>
#include <string>

#include "lathe/core/json.h"

namespace lathe {

struct YamlPosition {
  int line = 0;
  int column = 0;
};

// Dotted path of each mapping key ("model.d_model", "items.0.name") -> where the key was written.
using YamlKeyPositions = std::map<std::string, YamlPosition>;

// Parses a whole document. An empty document (only blanks and comments) gives null.
Json parse_yaml(const std::string& text, const std::string& source_name = "<yaml>",
                YamlKeyPositions* key_positions = nullptr);

// Reads and parses a file; a missing or unreadable file is a lathe::Error naming the path.
Json load_yaml_file(const std::string& path, YamlKeyPositions* key_positions = nullptr);

// Parses one inline value (scalar or flow collection) exactly as it would be read after "key: ",
// e.g. for command-line overrides `optimizer.lr=1e-3`.
Json parse_yaml_value(const std::string& text, const std::string& source_name);

}  // namespace lathe
