#include "lathe/core/json.h"

#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "lathe/core/error.h"

namespace lathe {

static const char* kind_name(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::null: return "null";
    case Json::Kind::boolean: return "boolean";
    case Json::Kind::number: return "number";
    case Json::Kind::string: return "string";
    case Json::Kind::array: return "array";
    case Json::Kind::object: return "object";
  }
  return "?";
}

double Json::as_number(const char* what) const {
  LATHE_CHECK(kind_ == Kind::number, what, " must be a number, found ", kind_name(kind_));
  return number_;
}

int64_t Json::as_int(const char* what) const {
  double value = as_number(what);
  LATHE_CHECK(std::floor(value) == value, what, " must be an integer, found ", value);
  return static_cast<int64_t>(value);
}

bool Json::as_bool(const char* what) const {
  LATHE_CHECK(kind_ == Kind::boolean, what, " must be true or false, found ", kind_name(kind_));
  return bool_;
}

const std::string& Json::as_string(const char* what) const {
  LATHE_CHECK(kind_ == Kind::string, what, " must be a string, found ", kind_name(kind_));
  return string_;
}

const std::vector<Json>& Json::items(const char* what) const {
  LATHE_CHECK(kind_ == Kind::array, what, " must be an array, found ", kind_name(kind_));
  return array_;
}

const std::vector<std::pair<std::string, Json>>& Json::members(const char* what) const {
  LATHE_CHECK(kind_ == Kind::object, what, " must be an object, found ", kind_name(kind_));
  return object_;
}

Json& Json::set(const std::string& key, Json value) {
  if (kind_ == Kind::null) kind_ = Kind::object;
  LATHE_ASSERT(kind_ == Kind::object);
  for (auto& member : object_)
    if (member.first == key) return member.second = std::move(value);
  object_.emplace_back(key, std::move(value));
  return object_.back().second;
}

const Json* Json::find(const std::string& key) const {
  if (kind_ != Kind::object) return nullptr;
  for (const auto& member : object_)
    if (member.first == key) return &member.second;
  return nullptr;
}

const Json& Json::get(const std::string& key) const {
  static const Json null_value;
  const Json* found = find(key);
  return found ? *found : null_value;
}

Json& Json::append_member(std::string key, Json value) {
  if (kind_ == Kind::null) kind_ = Kind::object;
  LATHE_ASSERT(kind_ == Kind::object);
  object_.emplace_back(std::move(key), std::move(value));
  return object_.back().second;
}

Json& Json::push(Json value) {
  if (kind_ == Kind::null) kind_ = Kind::array;
  LATHE_ASSERT(kind_ == Kind::array);
  array_.push_back(std::move(value));
  return array_.back();
}

size_t Json::size() const { return kind_ == Kind::array ? array_.size() : kind_ == Kind::object ? object_.size() : 0; }

static void dump_string(std::string& out, const std::string& text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  auto newline = [&](int level) {
    if (indent <= 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  switch (kind_) {
    case Kind::null: out += "null"; break;
    case Kind::boolean: out += bool_ ? "true" : "false"; break;
    case Kind::number: {
      if (!std::isfinite(number_)) {
        out += "null";
      } else if (std::floor(number_) == number_ && std::fabs(number_) < 1e15) {
        out += std::to_string(static_cast<int64_t>(number_));
      } else {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.9g", number_);
        out += buffer;
      }
      break;
    }
    case Kind::string: dump_string(out, string_); break;
    case Kind::array:
      out += '[';
      for (size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        array_[i].dump_to(out, indent, depth + 1);
      }
      if (!array_.empty()) newline(depth);
      out += ']';
      break;
    case Kind::object:
      out += '{';
      for (size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        dump_string(out, object_[i].first);
        out += indent > 0 ? ": " : ":";
        object_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!object_.empty()) newline(depth);
      out += '}';
      break;
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value(0);
    skip_space();
    if (position_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const char* message) { throw_error("invalid JSON at byte ", position_, ": ", message); }

  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' ||
                                        text_[position_] == '\t' || text_[position_] == '\r'))
      ++position_;
  }

  bool consume(const char* literal) {
    size_t length = std::char_traits<char>::length(literal);
    if (text_.compare(position_, length, literal) != 0) return false;
    position_ += length;
    return true;
  }

  Json parse_value(int depth) {
    if (depth > 200) fail("nesting too deep");
    skip_space();
    if (position_ >= text_.size()) fail("unexpected end of input");
    char c = text_[position_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    if (consume("null")) return Json();
    return parse_number();
  }

  Json parse_object(int depth) {
    Json object = Json::object();
    ++position_;
    skip_space();
    if (position_ < text_.size() && text_[position_] == '}') {
      ++position_;
      return object;
    }
    // Small objects look for duplicate keys by scanning; large ones (a tokenizer's vocabulary has
    // 10^5 keys) switch to a hash set, keeping parsing linear.
    std::unordered_set<std::string> keys;
    constexpr size_t kScanLimit = 16;
    for (;;) {
      skip_space();
      if (position_ >= text_.size() || text_[position_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_space();
      if (position_ >= text_.size() || text_[position_] != ':') fail("expected ':'");
      ++position_;
      bool duplicate;
      if (object.size() < kScanLimit) {
        duplicate = object.find(key) != nullptr;
      } else {
        if (keys.empty())
          for (const auto& member : object.members()) keys.insert(member.first);
        duplicate = !keys.insert(key).second;
      }
      if (duplicate) throw_error("invalid JSON at byte ", position_, ": duplicate key \"", key, "\"");
      object.append_member(std::move(key), parse_value(depth + 1));
      skip_space();
      if (position_ < text_.size() && text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (position_ < text_.size() && text_[position_] == '}') {
        ++position_;
        return object;
      }
      fail("expected ',' or '}'");
    }
  }

  Json parse_array(int depth) {
    Json array = Json::array();
    ++position_;
    skip_space();
    if (position_ < text_.size() && text_[position_] == ']') {
      ++position_;
      return array;
    }
    for (;;) {
      array.push(parse_value(depth + 1));
      skip_space();
      if (position_ < text_.size() && text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (position_ < text_.size() && text_[position_] == ']') {
        ++position_;
        return array;
      }
      fail("expected ',' or ']'");
    }
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  uint32_t parse_hex4() {
    if (position_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[position_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= h - '0';
      else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return code;
  }

  std::string parse_string() {
    ++position_;
    std::string out;
    while (position_ < text_.size()) {
      char c = text_[position_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (position_ >= text_.size()) break;
      char escape = text_[position_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = parse_hex4();
          if (code >= 0xd800 && code < 0xdc00 && consume("\\u")) {
            uint32_t low = parse_hex4();
            if (low < 0xdc00 || low >= 0xe000) fail("bad surrogate pair");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, code);
          break;
        }
        default: fail("unknown escape");
      }
    }
    fail("unterminated string");
  }

  Json parse_number() {
    size_t start = position_;
    if (position_ < text_.size() && text_[position_] == '-') ++position_;
    while (position_ < text_.size() && (isdigit(static_cast<unsigned char>(text_[position_])) || text_[position_] == '.' ||
                                        text_[position_] == 'e' || text_[position_] == 'E' || text_[position_] == '+' ||
                                        text_[position_] == '-'))
      ++position_;
    std::string token = text_.substr(start, position_ - start);
    if (token.empty() || token == "-") fail("expected a value");
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(token, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != token.size()) {
      position_ = start;
      fail("malformed number");
    }
    return Json(value);
  }

  const std::string& text_;
  size_t position_ = 0;
};

}  // namespace

Json Json::parse(const std::string& text) { return Parser(text).parse_document(); }

}  // namespace lathe
