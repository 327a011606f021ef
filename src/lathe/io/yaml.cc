// yaml-cpp does the syntax; this file turns its nodes into Json with lathe's scalar rules, merge
// keys and error messages (see yaml.h for the list).
#include "lathe/io/yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {
namespace {

constexpr int kMaxDepth = 64;            // deeper nesting is surely a mistake; also bounds the recursion
constexpr int64_t kMaxValues = 100'000;  // aliases can repeat a subtree exponentially ("billion laughs")
constexpr const char* kCoreTag = "tag:yaml.org,2002:";

bool is_digits(const std::string& text, size_t begin, size_t end) {
  if (begin >= end) return false;
  for (size_t i = begin; i < end; ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

// YAML 1.2 core schema: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
bool is_yaml_float(const std::string& text) {
  size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  size_t digits_before = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  bool has_integer_part = i > digits_before;
  bool has_fraction = false;
  if (i < text.size() && text[i] == '.') {
    size_t fraction_begin = ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    has_fraction = i > fraction_begin;
  }
  if (!has_integer_part && !has_fraction) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    if (!is_digits(text, i, text.size())) return false;
    i = text.size();
  }
  return i == text.size();
}

// yaml-cpp leaves plain scalars untyped (its own conversions follow YAML 1.1, where "yes" and
// "on" are booleans); configs follow the YAML 1.2 core schema, as PyYAML's successors do.
Json resolve_plain_scalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return Json();
  if (text == "true" || text == "True" || text == "TRUE") return Json(true);
  if (text == "false" || text == "False" || text == "FALSE") return Json(false);
  if (is_yaml_float(text)) return Json(std::strtod(text.c_str(), nullptr));  // integers included
  std::string unsigned_text = (text[0] == '-' || text[0] == '+') ? text.substr(1) : text;
  double sign = text[0] == '-' ? -1.0 : 1.0;
  if (unsigned_text == ".inf" || unsigned_text == ".Inf" || unsigned_text == ".INF")
    return Json(sign * std::numeric_limits<double>::infinity());
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return Json(std::numeric_limits<double>::quiet_NaN());
  return Json(text);
}

// yaml-cpp's parser messages, said in the terms of a config file.
std::string explain_parser_message(const std::string& message) {
  static const std::pair<const char*, const char*> kExplained[] = {
      {YAML::ErrorMsg::TAB_IN_INDENTATION, "tab in indentation (YAML indents with spaces)"},
      {YAML::ErrorMsg::MAP_VALUE, "unexpected ':' (quote values that contain ': ', or check the indentation)"},
      {YAML::ErrorMsg::END_OF_MAP,
       "bad indentation or text after a value: this line does not continue the mapping above"},
      {YAML::ErrorMsg::END_OF_SEQ,
       "bad indentation or text after a value: this line does not continue the sequence above"},
      {YAML::ErrorMsg::END_OF_SEQ_FLOW, "unterminated '[' (no matching ']')"},
      {YAML::ErrorMsg::END_OF_MAP_FLOW, "unterminated '{' (no matching '}')"},
      {YAML::ErrorMsg::BLOCK_ENTRY,
       "a block sequence cannot start on the same line as its key; start it on the next line"},
      {YAML::ErrorMsg::UNKNOWN_TOKEN, "a plain value cannot start with '@' or '`'; quote it"},
      {YAML::ErrorMsg::EOF_IN_SCALAR, "unterminated quoted string"},
      {YAML::ErrorMsg::FLOW_END, "unexpected ']' or '}' (nothing open to close)"},
      {YAML::ErrorMsg::UNKNOWN_ANCHOR, "alias to an anchor not defined before it (&name must come first)"},
  };
  for (const auto& [original, explained] : kExplained)
    if (message == original) return explained;
  return message;
}

class YamlConverter {
 public:
  // `column_offset`: characters of `text` before the user's own (parse_yaml_value's "v: ").
  YamlConverter(std::string text, std::string source, YamlKeyPositions* key_positions, int column_offset = -1)
      : text_(std::move(text)),
        source_(std::move(source)),
        key_positions_(key_positions),
        value_offset_(column_offset) {}

  Json parse_document() {
    YAML::Node document;
    try {
      check_single_document();
      document = YAML::Load(text_);
    } catch (const YAML::ParserException& error) {
      fail_at_tab_before(error.mark);
      if (error.msg == YAML::ErrorMsg::END_OF_SEQ_FLOW || error.msg == YAML::ErrorMsg::END_OF_MAP_FLOW) {
        const YAML::Mark open = unclosed_bracket(error.mark);
        if (open.pos != error.mark.pos)
          fail(open, text_[static_cast<size_t>(open.pos)] == '[' ? "unterminated '[' (no matching ']')"
                                                                 : "unterminated '{' (no matching '}')");
      }
      fail(error.mark, explain_parser_message(error.msg));
    } catch (const YAML::Exception& error) {
      fail(error.mark, error.msg);
    }
    return convert(document, "", 0);
  }

  const std::string& text() const { return text_; }

 private:
  // Records where each document starts; nothing else.
  struct DocumentStarts : YAML::EventHandler {
    std::vector<YAML::Mark> starts;
    void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };

  // At most two documents are asked for: yaml-cpp 0.7's LoadAll can loop forever, allocating, on
  // a stray ',' (it reports an empty document there again and again without moving on).
  void check_single_document() const {
    std::istringstream stream(text_);
    YAML::Parser parser(stream);
    DocumentStarts documents;
    if (!parser.HandleNextDocument(documents) || !parser.HandleNextDocument(documents)) return;
    const YAML::Mark second = documents.starts.back();
    const size_t at = second.pos >= 0 ? static_cast<size_t>(second.pos) : text_.size();
    if (at < text_.size() && text_[at] == ',')
      fail(second, "unexpected ',' outside a flow collection ([...] or {...}); quote the value");
    fail(second, text_.compare(at, 3, "---") == 0
                     ? "a second YAML document ('---'): a config file holds one"
                     : "this line does not continue the document above (check its indentation)");
  }

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    if (value_offset_ >= 0)
      throw_error(source_, ": ", message, " (at character ", std::max(1, mark.column - value_offset_ + 1), ")");
    if (mark.is_null() || mark.line < 0) throw_error(source_, ": ", message);
    throw_error(source_, ":", mark.line + 1, ":", mark.column + 1, ": ", message);
  }

  // yaml-cpp reads some tab-indented lines as something else and fails later: a tab in the
  // indentation of a line up to the failing one is the real reason.
  void fail_at_tab_before(const YAML::Mark& mark) const {
    size_t line_start = 0;
    for (int line = 0; line <= mark.line && line_start < text_.size(); ++line) {
      const size_t content = text_.find_first_not_of(" \t", line_start);
      const size_t tab = text_.find('\t', line_start);
      const size_t line_end = std::min(text_.find('\n', line_start), text_.size());
      if (tab < content && content < line_end && text_[content] != '#' && text_[content] != '\r') {
        YAML::Mark at;
        at.line = line;
        at.column = static_cast<int>(tab - line_start);
        fail(at, "tab in indentation (YAML indents with spaces)");
      }
      line_start = line_end + 1;
    }
  }

  // yaml-cpp places an unterminated flow collection at the end of the input; the opening bracket
  // left open before `end` (outside quotes and comments) is where the mistake is.
  YAML::Mark unclosed_bracket(const YAML::Mark& end) const {
    struct Open {
      size_t at;
      int line, column;
    };
    std::vector<Open> open;
    int line = 0, column = 0;
    char quote = 0;
    const size_t stop = std::min(text_.size(), static_cast<size_t>(std::max(end.pos, 0)));
    for (size_t i = 0; i < stop; ++i, ++column) {
      const char c = text_[i];
      if (c == '\n') {
        ++line;
        column = -1;
      } else if (quote) {
        if (quote == '"' && c == '\\') {
          ++i;
          ++column;
        } else if (c == quote) {
          quote = 0;
        }
      } else if (c == '#' && (i == 0 || text_[i - 1] == ' ' || text_[i - 1] == '\t' || text_[i - 1] == '\n')) {
        while (i + 1 < stop && text_[i + 1] != '\n') ++i;
      } else if ((c == '"' || c == '\'') && !open.empty()) {
        quote = c;
      } else if (c == '[' || c == '{') {
        open.push_back({i, line, column});
      } else if ((c == ']' || c == '}') && !open.empty()) {
        open.pop_back();
      }
    }
    if (open.empty()) return end;
    YAML::Mark mark;
    mark.pos = static_cast<int>(open.back().at);
    mark.line = open.back().line;
    mark.column = open.back().column;
    return mark;
  }

  void count_value(const YAML::Node& node) {
    if (++values_ > kMaxValues)
      fail(node.Mark(), str_cat("the document expands to more than ", kMaxValues, " values (aliases repeated?)"));
  }

  // yaml-cpp 0.7 reads a quoted string left open at the end of the input as if it were closed.
  void check_quote_closed(const YAML::Node& node) const {
    const int begin = node.Mark().pos;
    if (begin < 0 || static_cast<size_t>(begin) >= text_.size()) return;
    const char quote = text_[static_cast<size_t>(begin)];
    if (quote != '"' && quote != '\'') return;
    for (size_t i = static_cast<size_t>(begin) + 1; i < text_.size(); ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;
      } else if (text_[i] == quote) {
        if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;
        } else {
          return;
        }
      }
    }
    fail(node.Mark(), quote == '"' ? "unterminated double-quoted string" : "unterminated single-quoted string");
  }

  Json convert_scalar(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    const std::string& value = node.Scalar();
    if (tag == "?") return resolve_plain_scalar(value);
    if (tag == "!") {
      check_quote_closed(node);
      return Json(value);
    }
    if (tag == str_cat(kCoreTag, "str")) return Json(value);
    Json resolved = resolve_plain_scalar(value);
    bool matches = (tag == str_cat(kCoreTag, "null") && resolved.is_null()) ||
                   (tag == str_cat(kCoreTag, "bool") && resolved.kind() == Json::Kind::boolean) ||
                   ((tag == str_cat(kCoreTag, "int") || tag == str_cat(kCoreTag, "float")) && resolved.is_number());
    if (matches) return resolved;
    if (tag.rfind(kCoreTag, 0) == 0 && tag != str_cat(kCoreTag, "map") && tag != str_cat(kCoreTag, "seq"))
      fail(node.Mark(), str_cat("'", value, "' is not a valid !!", tag.substr(std::string(kCoreTag).size())));
    fail(node.Mark(), str_cat("unsupported tag '", tag, "' (configs use plain values; remove the tag)"));
  }

  void check_collection_tag(const YAML::Node& node, const char* core_name) const {
    const std::string& tag = node.Tag();
    if (tag.empty() || tag == "?" || tag == "!" || tag == str_cat(kCoreTag, core_name)) return;
    fail(node.Mark(), str_cat("unsupported tag '", tag, "' (configs use plain values; remove the tag)"));
  }

  static std::string child_path(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  Json convert(const YAML::Node& node, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(node.Mark(), str_cat("nesting deeper than ", kMaxDepth, " levels"));
    count_value(node);
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return convert_scalar(node);
      case YAML::NodeType::Sequence: {
        check_collection_tag(node, "seq");
        Json sequence = Json::array();
        for (const YAML::Node& item : node)
          sequence.push(convert(item, child_path(path, std::to_string(sequence.size())), depth + 1));
        return sequence;
      }
      case YAML::NodeType::Map: {
        check_collection_tag(node, "map");
        Json mapping = Json::object();
        add_mapping(mapping, node, path, depth, false);
        return mapping;
      }
      case YAML::NodeType::Null:
        if (node.Tag() == str_cat(kCoreTag, "str")) return Json("");
        return Json();
      case YAML::NodeType::Undefined:
        break;
    }
    fail(node.Mark(), "undefined value");
  }

  // The keys of `node` into `mapping`. Written keys must be new; merged ones (`from_merge`) only
  // fill keys not yet set. Merge keys are applied after the mapping's own keys, so those win.
  void add_mapping(Json& mapping, const YAML::Node& node, const std::string& path, int depth, bool from_merge) {
    std::vector<YAML::Node> merges;
    std::map<std::string, int> first_line_of_key;
    for (const auto& entry : node) {  // *iterator is a temporary: `it->first` would dangle
      const YAML::Node& key_node = entry.first;
      if (key_node.Type() == YAML::NodeType::Null) fail(key_node.Mark(), "missing key before ':'");
      if (key_node.Type() != YAML::NodeType::Scalar)
        fail(key_node.Mark(), "a mapping key must be a plain value, not a list or mapping");
      const std::string key = convert_key(key_node);
      if (key == "<<" && key_node.Tag() == "?") {
        merges.push_back(entry.second);
        continue;
      }
      auto [previous, inserted] = first_line_of_key.emplace(key, key_node.Mark().line + 1);
      if (!inserted) fail(key_node.Mark(), str_cat("duplicate key '", key, "' (first at line ", previous->second, ")"));
      if (from_merge && mapping.find(key)) continue;
      std::string key_path = child_path(path, key);
      if (key_positions_ && !(from_merge && key_positions_->count(key_path)))
        (*key_positions_)[key_path] = {key_node.Mark().line + 1, key_node.Mark().column + 1};
      mapping.set(key, convert(entry.second, key_path, depth + 1));
    }
    for (const YAML::Node& merge : merges) {
      if (merge.IsMap()) {
        add_mapping(mapping, merge, path, depth, true);
        continue;
      }
      bool all_mappings = merge.IsSequence();
      for (const YAML::Node& item : merge) all_mappings = all_mappings && item.IsMap();
      if (!all_mappings) fail(merge.Mark(), "a merge key '<<' takes a mapping or a list of mappings (e.g. <<: *base)");
      for (const YAML::Node& item : merge) add_mapping(mapping, item, path, depth, true);
    }
  }

  std::string convert_key(const YAML::Node& key_node) {
    Json key = convert_scalar(key_node);
    if (key.is_string()) return key.as_string();
    return key_node.Scalar();  // "1: x" or "true: y": the key as written
  }

  std::string text_;
  std::string source_;
  YamlKeyPositions* key_positions_;
  int value_offset_;
  int64_t values_ = 0;
};

std::string without_byte_order_mark(const std::string& text) {
  return text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? text.substr(3) : text;
}

}  // namespace

Json parse_yaml(const std::string& text, const std::string& source_name, YamlKeyPositions* key_positions) {
  return YamlConverter(without_byte_order_mark(text), source_name, key_positions).parse_document();
}

Json load_yaml_file(const std::string& path, YamlKeyPositions* key_positions) {
  LATHE_CHECK(!std::filesystem::is_directory(path), "config file '", path, "' is a directory, expected a YAML file");
  std::ifstream file(path, std::ios::binary);
  LATHE_CHECK(file.good(), "cannot read config file '", path, "' (no such file or not readable)");
  std::ostringstream contents;
  contents << file.rdbuf();
  LATHE_CHECK(!file.bad(), "error while reading config file '", path, "'");
  return parse_yaml(contents.str(), path, key_positions);
}

Json parse_yaml_value(const std::string& text, const std::string& source_name) {
  LATHE_CHECK(text.find('\n') == std::string::npos && text.find('\r') == std::string::npos, source_name,
              ": expected a single-line value");
  const std::string prefix = "v: ";
  Json root = YamlConverter(prefix + text, source_name, nullptr, static_cast<int>(prefix.size())).parse_document();
  // "v: " + text is one mapping with the one key, unless the text ended it (a comment-only value
  // such as "# x" leaves "v" null, which is what "key: # x" means too).
  LATHE_CHECK(root.is_object() && root.size() == 1 && root.find("v"), source_name, ": expected a single value");
  return root.get("v");
}

}  // namespace lathe
