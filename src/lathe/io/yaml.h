// YAML config files read through yaml-cpp (Debian's libyaml-cpp-dev), producing lathe::Json values.
//
// Full YAML 1.2 syntax as yaml-cpp reads it: block and flow collections over any number of lines,
// comments, quoted scalars, block scalars (| and >, with their chomping indicators), anchors (&a)
// and aliases (*a), complex keys (? key) whose key is a scalar, and one leading document marker.
// On top of yaml-cpp, lathe adds:
//   - merge keys: `<<: *base` or `<<: [*a, *b]` copies the keys of the mappings named that the
//     mapping does not set itself (earlier mappings in the list win), as PyYAML does;
//   - the YAML 1.2 core schema for plain scalars: null / ~ / empty, true / false, integers, floats
//     (1e-3, .5, -2.0, .inf, .nan); everything else is a string ("yes" stays a string). Quoted and
//     block scalars are strings. The tags !!str, !!int, !!float, !!bool and !!null are honoured;
//     any other tag is an error;
//   - errors yaml-cpp lets through: duplicate keys, a second document, an unterminated quoted
//     string at the end of the file, a mapping key that is not a scalar, nesting deeper than 64
//     levels, and aliases that expand to more than 100,000 values.
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

// Dotted path of each mapping key ("model.d_model", "items.0.name") -> where the key was written
// (for a key copied by a merge key or an alias: where the copied mapping wrote it).
using YamlKeyPositions = std::map<std::string, YamlPosition>;

// Parses a whole document. An empty document (only blanks and comments) gives null.
Json parse_yaml(const std::string& text, const std::string& source_name = "<yaml>",
                YamlKeyPositions* key_positions = nullptr);

// Reads and parses a file; a missing or unreadable file is a lathe::Error naming the path.
Json load_yaml_file(const std::string& path, YamlKeyPositions* key_positions = nullptr);

// Parses one inline value exactly as it would be read after "key: " on one line, e.g. for
// command-line overrides `optimizer.lr=1e-3`. Errors read "SOURCE: what (at character N)".
Json parse_yaml_value(const std::string& text, const std::string& source_name);

}  // namespace lathe
