#include "lathe/io/yaml.h"

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

constexpr int kMaxDepth = 64;  // deeper nesting is surely a mistake; also bounds the recursion

// One non-blank, non-comment line. `start` is the index of its first content character: the
// indentation, or for "- item" lines the column of the item once the dash has been read.
struct Line {
  int number = 0;
  std::string text;
  size_t start = 0;
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_flow_indicator(char c) { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'; }

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

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

class YamlParser {
 public:
  YamlParser(std::string source, YamlKeyPositions* key_positions, bool single_value)
      : source_(std::move(source)), key_positions_(key_positions), single_value_(single_value) {}

  Json parse_document(const std::string& text) {
    split_lines(text);
    if (lines_.empty()) return Json();
    Json root = parse_node(lines_[0].start, "", 0);
    if (next_ < lines_.size()) {
      OpenBlock open(open_indents_, lines_[0].start);
      fail_bad_indentation(lines_[next_]);
    }
    return root;
  }

  Json parse_value(const std::string& text) {
    LATHE_CHECK(text.find('\n') == std::string::npos, source_, ": expected a single-line value");
    lines_.push_back({1, text, 0});
    size_t position = 0;
    Json value = parse_inline_value(lines_[0], position, "", false, 0);
    expect_line_end(lines_[0], position);
    return value;
  }

 private:
  [[noreturn]] void fail(const Line& line, size_t index, const std::string& message) const {
    if (single_value_) throw_error(source_, ": ", message, " (at character ", index + 1, ")");
    throw_error(source_, ":", line.number, ":", index + 1, ": ", message);
  }

  [[noreturn]] void fail_unsupported(const Line& line, size_t index, const char* feature) const {
    fail(line, index, str_cat("unsupported YAML feature: ", feature));
  }

  void split_lines(const std::string& text) {
    std::istringstream stream(text);
    std::string raw;
    int number = 0;
    bool seen_document_start = false;
    while (std::getline(stream, raw)) {
      ++number;
      if (!raw.empty() && raw.back() == '\r') raw.pop_back();
      if (number == 1 && raw.compare(0, 3, "\xEF\xBB\xBF") == 0) raw.erase(0, 3);  // UTF-8 byte order mark
      Line line{number, raw, 0};
      size_t first = raw.find_first_not_of(" \t");
      if (first == std::string::npos || raw[first] == '#') continue;
      size_t tab = raw.find('\t');
      if (tab < first) fail(line, tab, "tab in indentation (YAML indents with spaces)");
      line.start = first;
      bool marker_ends = raw.size() == 3 || (raw.size() > 3 && is_blank(raw[3]));
      if (raw.compare(0, 3, "---") == 0 && marker_ends) {
        size_t after = raw.find_first_not_of(" \t", 3);
        if (seen_document_start || !lines_.empty()) fail_unsupported(line, 0, "multiple documents ('---')");
        if (after != std::string::npos && raw[after] != '#') fail(line, after, "expected nothing after '---'");
        seen_document_start = true;
        continue;
      }
      if (raw.compare(0, 3, "...") == 0 && marker_ends) fail_unsupported(line, 0, "document end marker ('...')");
      if (raw[0] == '%') fail_unsupported(line, 0, "directives (%YAML, %TAG)");
      lines_.push_back(std::move(line));
    }
  }

  static bool is_sequence_entry(const Line& line) {
    return line.text[line.start] == '-' && (line.start + 1 == line.text.size() || is_blank(line.text[line.start + 1]));
  }

  static size_t skip_blanks(const Line& line, size_t position) {
    while (position < line.text.size() && is_blank(line.text[position])) ++position;
    return position;
  }

  // True at the end of the line or at a comment ('#' at the start or after a blank).
  static bool at_line_end(const Line& line, size_t position) {
    return position >= line.text.size() ||
           (line.text[position] == '#' && (position == 0 || is_blank(line.text[position - 1])));
  }

  void expect_line_end(const Line& line, size_t position) const {
    position = skip_blanks(line, position);
    if (at_line_end(line, position)) return;
    if (line.text[position] == ':')
      fail(line, position, "unexpected ':' after a value (quote values that contain ': ')");
    fail(line, position, str_cat("unexpected '", line.text.substr(position), "' after the value"));
  }

  // Index of the ':' that ends a mapping key on this line, or npos when the line is no mapping entry.
  static size_t find_key_colon(const Line& line) {
    const std::string& text = line.text;
    size_t position = line.start;
    auto is_key_colon = [&](size_t i) {
      return i < text.size() && text[i] == ':' && (i + 1 == text.size() || is_blank(text[i + 1]));
    };
    if (text[position] == '"' || text[position] == '\'') {
      char quote = text[position];
      for (++position; position < text.size(); ++position) {
        if (quote == '"' && text[position] == '\\') {
          ++position;
        } else if (text[position] == quote) {
          if (quote == '\'' && position + 1 < text.size() && text[position + 1] == '\'') {
            ++position;
          } else {
            break;
          }
        }
      }
      if (position >= text.size()) return std::string::npos;
      position = skip_blanks(line, position + 1);
      return is_key_colon(position) ? position : std::string::npos;
    }
    if (text[position] == '[' || text[position] == '{') return std::string::npos;
    for (; position < text.size() && !at_line_end(line, position); ++position)
      if (is_key_colon(position)) return position;
    return std::string::npos;
  }

  static std::string child_path(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void record_key(const std::string& path, const Line& line, size_t index) {
    if (key_positions_) (*key_positions_)[path] = {line.number, static_cast<int>(index) + 1};
  }

  void check_depth(const Line& line, size_t index, int depth) const {
    if (depth > kMaxDepth) fail(line, index, str_cat("nesting deeper than ", kMaxDepth, " levels"));
  }

  // Indentations of the blocks being read, outermost first: a line that ends a block must
  // return to one of them.
  struct OpenBlock {
    OpenBlock(std::vector<size_t>& indents, size_t indent) : indents_(indents) { indents_.push_back(indent); }
    ~OpenBlock() { indents_.pop_back(); }
    std::vector<size_t>& indents_;
  };

  bool is_open_indent(size_t indent) const {
    for (size_t open : open_indents_)
      if (open == indent) return true;
    return false;
  }

  [[noreturn]] void fail_bad_indentation(const Line& line) const {
    std::vector<size_t> choices;  // innermost first, each once
    for (size_t i = open_indents_.size(); i-- > 0;)
      if (choices.empty() || choices.back() != open_indents_[i]) choices.push_back(open_indents_[i]);
    std::string expected;
    for (size_t i = 0; i < choices.size(); ++i)
      expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::to_string(choices[i]);
    fail(line, line.start, str_cat("bad indentation: expected ", expected, " spaces, found ", line.start));
  }

  // The node whose first line is lines_[next_], indented by `indent`.
  Json parse_node(size_t indent, const std::string& path, int depth) {
    Line& line = lines_[next_];
    check_depth(line, line.start, depth);
    if (is_sequence_entry(line)) return parse_block_sequence(indent, path, depth);
    if (find_key_colon(line) != std::string::npos) return parse_block_mapping(indent, path, depth);
    size_t position = line.start;
    Json value = parse_inline_value(line, position, path, false, depth);
    expect_line_end(line, position);
    ++next_;
    return value;
  }

  // The value after "key:" or "-" with nothing else on the line: a deeper block, a sequence at the
  // key's own indentation (YAML allows "key:\n- a"), or null.
  Json parse_nested(size_t parent_indent, const std::string& path, bool allow_same_indent_sequence, int depth) {
    if (next_ >= lines_.size()) return Json();
    const Line& line = lines_[next_];
    if (line.start > parent_indent) return parse_node(line.start, path, depth + 1);
    if (allow_same_indent_sequence && line.start == parent_indent && is_sequence_entry(line))
      return parse_block_sequence(parent_indent, path, depth + 1);
    return Json();
  }

  Json parse_block_sequence(size_t indent, const std::string& path, int depth) {
    OpenBlock open(open_indents_, indent);
    Json sequence = Json::array();
    while (next_ < lines_.size()) {
      Line& line = lines_[next_];
      if (line.start != indent) {
        if (line.start < indent && is_open_indent(line.start)) break;
        fail_bad_indentation(line);
      }
      if (!is_sequence_entry(line)) break;  // e.g. the next key of a mapping holding this sequence
      std::string item_path = child_path(path, std::to_string(sequence.size()));
      size_t item_start = skip_blanks(line, line.start + 1);
      if (at_line_end(line, item_start)) {
        ++next_;
        sequence.push(parse_nested(indent, item_path, false, depth));
      } else {
        line.start = item_start;  // read "- key: value" as a node indented to the item's column
        sequence.push(parse_node(item_start, item_path, depth + 1));
      }
    }
    return sequence;
  }

  Json parse_block_mapping(size_t indent, const std::string& path, int depth) {
    OpenBlock open(open_indents_, indent);
    Json mapping = Json::object();
    std::map<std::string, int> first_line_of_key;
    while (next_ < lines_.size()) {
      const Line& line = lines_[next_];
      if (line.start != indent) {
        if (line.start < indent && is_open_indent(line.start)) break;
        fail_bad_indentation(line);
      }
      if (is_sequence_entry(line)) fail(line, line.start, "expected 'key: value', found a sequence entry '- '");
      size_t colon = find_key_colon(line);
      if (colon == std::string::npos) fail(line, line.start, "expected 'key: value'");
      std::string key = parse_key(line, colon);
      auto [previous, inserted] = first_line_of_key.emplace(key, line.number);
      if (!inserted)
        fail(line, line.start, str_cat("duplicate key '", key, "' (first at line ", previous->second, ")"));
      std::string key_path = child_path(path, key);
      record_key(key_path, line, line.start);
      size_t value_start = skip_blanks(line, colon + 1);
      if (at_line_end(line, value_start)) {
        ++next_;
        mapping.set(key, parse_nested(indent, key_path, true, depth));
      } else {
        const Line& value_line = line;
        Json value = parse_inline_value(value_line, value_start, key_path, false, depth + 1);
        expect_line_end(value_line, value_start);
        ++next_;
        mapping.set(key, std::move(value));
      }
    }
    return mapping;
  }

  std::string parse_key(const Line& line, size_t colon) {
    char first = line.text[line.start];
    if (first == '"' || first == '\'') {
      size_t position = line.start;
      return first == '"' ? parse_double_quoted(line, position) : parse_single_quoted(line, position);
    }
    if (first == '?' && (line.start + 1 == line.text.size() || is_blank(line.text[line.start + 1])))
      fail_unsupported(line, line.start, "complex keys ('? ')");
    if (first == '&') fail_unsupported(line, line.start, "anchors (&name)");
    if (first == '*') fail_unsupported(line, line.start, "aliases (*name)");
    if (first == '!') fail_unsupported(line, line.start, "tags (!tag)");
    size_t end = colon;
    while (end > line.start && is_blank(line.text[end - 1])) --end;
    return line.text.substr(line.start, end - line.start);
  }

  // A scalar or flow collection starting at `position` (blanks allowed before it); leaves
  // `position` just after it. Nothing at all (end of line, comment) is null.
  Json parse_inline_value(const Line& line, size_t& position, const std::string& path, bool in_flow, int depth) {
    check_depth(line, position, depth);
    position = skip_blanks(line, position);
    if (at_line_end(line, position)) return Json();
    const std::string& text = line.text;
    char first = text[position];
    bool blank_follows = position + 1 == text.size() || is_blank(text[position + 1]);
    switch (first) {
      case '"':
        return Json(parse_double_quoted(line, position));
      case '\'':
        return Json(parse_single_quoted(line, position));
      case '[':
        return parse_flow_sequence(line, position, path, depth);
      case '{':
        return parse_flow_mapping(line, position, path, depth);
      case '&':
        fail_unsupported(line, position, "anchors (&name)");
      case '*':
        fail_unsupported(line, position, "aliases (*name)");
      case '!':
        fail_unsupported(line, position, "tags (!tag)");
      case '|':
      case '>':
        fail_unsupported(line, position, "block scalars (| and >); use a quoted string");
      case '%':
      case '@':
      case '`':
        fail(line, position, str_cat("a plain value cannot start with '", first, "'; quote it"));
      case ']':
      case '}':
      case ',':
        fail(line, position, str_cat("unexpected '", first, "'"));
      default:
        break;
    }
    if (first == '?' && blank_follows) fail_unsupported(line, position, "complex keys ('? ')");
    if (first == '-' && blank_follows)
      fail(line, position, "a block sequence cannot start on the same line as its key; start it on the next line");
    if (first == ':' && blank_follows) fail(line, position, "missing key before ':'");
    return resolve_plain_scalar(parse_plain(line, position, in_flow));
  }

  // Plain (unquoted) text up to the end of the line, a comment, ": ", or in flow context a ',[]{}'.
  static std::string parse_plain(const Line& line, size_t& position, bool in_flow) {
    const std::string& text = line.text;
    size_t begin = position;
    for (; position < text.size(); ++position) {
      char c = text[position];
      if (c == '#' && is_blank(text[position - 1])) break;
      if (in_flow && is_flow_indicator(c)) break;
      bool next_ends = position + 1 == text.size() || is_blank(text[position + 1]) ||
                       (in_flow && is_flow_indicator(text[position + 1]));
      if (c == ':' && next_ends) break;
    }
    size_t end = position;
    while (end > begin && is_blank(text[end - 1])) --end;
    return text.substr(begin, end - begin);
  }

  std::string parse_single_quoted(const Line& line, size_t& position) const {
    size_t open = position;
    std::string value;
    for (++position; position < line.text.size(); ++position) {
      char c = line.text[position];
      if (c != '\'') {
        value += c;
      } else if (position + 1 < line.text.size() && line.text[position + 1] == '\'') {
        value += '\'';
        ++position;
      } else {
        ++position;
        return value;
      }
    }
    fail(line, open, "unterminated single-quoted string (quoted strings must end on the same line)");
  }

  uint32_t parse_hex_escape(const Line& line, size_t& position, int digits) const {
    uint32_t code_point = 0;
    for (int i = 0; i < digits; ++i) {
      size_t at = position + 1 + static_cast<size_t>(i);
      char c = at < line.text.size() ? line.text[at] : '\0';
      int digit = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
      if (digit < 0) fail(line, position - 1, str_cat("escape needs ", digits, " hex digits"));
      code_point = code_point * 16 + static_cast<uint32_t>(digit);
    }
    position += static_cast<size_t>(digits);
    if (code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
      fail(line, position, "escape is not a valid Unicode code point");
    return code_point;
  }

  std::string parse_double_quoted(const Line& line, size_t& position) const {
    size_t open = position;
    const std::string& text = line.text;
    std::string value;
    for (++position; position < text.size(); ++position) {
      char c = text[position];
      if (c == '"') {
        ++position;
        return value;
      }
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++position >= text.size()) break;
      switch (char escape = text[position]) {
        case '0':
          value += '\0';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 't':
        case '\t':
          value += '\t';
          break;
        case 'n':
          value += '\n';
          break;
        case 'v':
          value += '\v';
          break;
        case 'f':
          value += '\f';
          break;
        case 'r':
          value += '\r';
          break;
        case 'e':
          value += '\x1b';
          break;
        case ' ':
        case '"':
        case '/':
        case '\\':
          value += escape;
          break;
        case 'N':
          append_utf8(value, 0x85);
          break;
        case '_':
          append_utf8(value, 0xA0);
          break;
        case 'L':
          append_utf8(value, 0x2028);
          break;
        case 'P':
          append_utf8(value, 0x2029);
          break;
        case 'x':
          append_utf8(value, parse_hex_escape(line, position, 2));
          break;
        case 'u':
          append_utf8(value, parse_hex_escape(line, position, 4));
          break;
        case 'U':
          append_utf8(value, parse_hex_escape(line, position, 8));
          break;
        default:
          fail(line, position - 1, str_cat("unknown escape '\\", escape, "' in double-quoted string"));
      }
    }
    fail(line, open, "unterminated double-quoted string (quoted strings must end on the same line)");
  }

  // After an entry of a flow collection: ',' (more entries) or the closing bracket. Returns true at the end.
  bool finish_flow_entry(const Line& line, size_t& position, char close, size_t open) const {
    position = skip_blanks(line, position);
    if (position >= line.text.size() || at_line_end(line, position))
      fail(line, open, str_cat("unterminated '", line.text[open], "' (flow collections must end on the same line)"));
    if (line.text[position] == ',') {
      ++position;
      return false;
    }
    if (line.text[position] == close) {
      ++position;
      return true;
    }
    fail(line, position, str_cat("expected ',' or '", close, "', found '", line.text[position], "'"));
  }

  bool at_flow_close(const Line& line, size_t& position, char close, size_t open) const {
    position = skip_blanks(line, position);
    if (at_line_end(line, position))
      fail(line, open, str_cat("unterminated '", line.text[open], "' (flow collections must end on the same line)"));
    if (line.text[position] != close) return false;
    ++position;
    return true;
  }

  Json parse_flow_sequence(const Line& line, size_t& position, const std::string& path, int depth) {
    size_t open = position++;
    Json sequence = Json::array();
    while (!at_flow_close(line, position, ']', open)) {
      if (line.text[position] == ',') fail(line, position, "empty entry in flow sequence");
      std::string item_path = child_path(path, std::to_string(sequence.size()));
      sequence.push(parse_inline_value(line, position, item_path, true, depth + 1));
      if (finish_flow_entry(line, position, ']', open)) break;
    }
    return sequence;
  }

  Json parse_flow_mapping(const Line& line, size_t& position, const std::string& path, int depth) {
    size_t open = position++;
    Json mapping = Json::object();
    while (!at_flow_close(line, position, '}', open)) {
      size_t key_start = position;
      char first = line.text[position];
      std::string key;
      if (first == '"') {
        key = parse_double_quoted(line, position);
      } else if (first == '\'') {
        key = parse_single_quoted(line, position);
      } else if (first == '[' || first == '{' || first == ',') {
        fail(line, position, "expected a key in flow mapping");
      } else {
        key = parse_plain(line, position, true);
      }
      position = skip_blanks(line, position);
      if (position >= line.text.size() || line.text[position] != ':')
        fail(line, position, str_cat("expected ':' after key '", key, "' in flow mapping"));
      ++position;
      if (mapping.find(key)) fail(line, key_start, str_cat("duplicate key '", key, "'"));
      std::string key_path = child_path(path, key);
      record_key(key_path, line, key_start);
      size_t value_start = skip_blanks(line, position);
      bool empty_value =
          value_start < line.text.size() && (line.text[value_start] == ',' || line.text[value_start] == '}');
      mapping.set(key, empty_value ? Json() : parse_inline_value(line, position, key_path, true, depth + 1));
      if (empty_value) position = value_start;
      if (finish_flow_entry(line, position, '}', open)) break;
    }
    return mapping;
  }

  std::string source_;
  YamlKeyPositions* key_positions_;
  bool single_value_;
  std::vector<Line> lines_;
  std::vector<size_t> open_indents_;
  size_t next_ = 0;  // the first line not yet consumed
};

}  // namespace

Json parse_yaml(const std::string& text, const std::string& source_name, YamlKeyPositions* key_positions) {
  return YamlParser(source_name, key_positions, false).parse_document(text);
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
  return YamlParser(source_name, nullptr, true).parse_value(text);
}

}  // namespace lathe
