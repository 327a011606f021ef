#include "lathe/core/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
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
  if (is_integer_) return integer_;
  // 2^63 is exactly representable; every double below it in magnitude converts without overflow.
  LATHE_CHECK(std::floor(value) == value && value >= -9223372036854775808.0 && value < 9223372036854775808.0, what,
              " must be an integer, found ", Json(value).dump(0));
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
      if (is_integer_) {
        out += std::to_string(integer_);
      } else if (!std::isfinite(number_)) {
        out += "null";
      } else if (std::floor(number_) == number_ && std::fabs(number_) < 1e15) {
        out += std::to_string(static_cast<int64_t>(number_));
      } else {
        char buffer[32];  // the shortest text that reads back to the same double
        const auto written = std::to_chars(buffer, buffer + sizeof buffer, number_);
        out.append(buffer, written.ptr);
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

// nlohmann/json's SAX events build a lathe::Json directly (no second tree). The parser itself is
// iterative; the depth limit keeps the recursive dump and destructor of a hostile file bounded.
class JsonBuilder {
 public:
  using number_integer_t = nlohmann::json::number_integer_t;
  using number_unsigned_t = nlohmann::json::number_unsigned_t;
  using number_float_t = nlohmann::json::number_float_t;
  using string_t = nlohmann::json::string_t;
  using binary_t = nlohmann::json::binary_t;

  static constexpr size_t kMaxDepth = 200;
  static constexpr size_t kScanLimit = 16;  // objects beyond this many keys check duplicates by hash

  bool null() { return add(Json()); }
  bool boolean(bool value) { return add(Json(value)); }
  bool number_integer(number_integer_t value) { return add(Json(static_cast<int64_t>(value))); }
  bool number_unsigned(number_unsigned_t value) {
    if (value <= static_cast<number_unsigned_t>(INT64_MAX)) return add(Json(static_cast<int64_t>(value)));
    return add(Json(static_cast<double>(value)));
  }
  bool number_float(number_float_t value, const string_t& text) {
    if (!std::isfinite(value)) return fail("number " + text + " is out of range");
    return add(Json(static_cast<double>(value)));
  }
  bool string(string_t& value) { return add(Json(std::move(value))); }
  bool binary(binary_t&) { return fail("binary values are not JSON"); }
  bool start_object(size_t) {
    if (!add(Json::object())) return false;
    return open();
  }
  bool key(string_t& key) {
    Frame& frame = frames_.back();
    bool duplicate;
    if (frame.container->size() < kScanLimit) {
      duplicate = frame.container->find(key) != nullptr;
    } else {
      if (!frame.keys) {
        frame.keys = std::make_unique<std::unordered_set<std::string>>();
        for (const auto& member : frame.container->members()) frame.keys->insert(member.first);
      }
      duplicate = !frame.keys->insert(key).second;
    }
    if (duplicate) return fail("duplicate key \"" + key + "\"");
    pending_key_ = std::move(key);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(size_t) {
    if (!add(Json::array())) return false;
    return open();
  }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& error) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." -> from "line".
    const std::string what = error.what();
    const size_t at = what.find(" at line ");
    error_ = at == std::string::npos ? what : what.substr(at + 4);
    return false;
  }

  Json take_root() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    Json* container;
    std::unique_ptr<std::unordered_set<std::string>> keys;
  };

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }
  // The value's slot: the root, the next array element or the member named by the pending key.
  // Pointers into a parent stay valid: a parent grows only after its open child has closed.
  bool add(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      last_ = &root_;
    } else if (frames_.back().container->is_array()) {
      last_ = &frames_.back().container->push(std::move(value));
    } else {
      last_ = &frames_.back().container->append_member(std::move(pending_key_), std::move(value));
    }
    return true;
  }
  bool open() {
    // Appended, not `"..." + std::to_string(...)`: GCC 12 at -O3 reports a false -Warray-bounds
    // inside std::string's operator+ here once the standard headers come precompiled.
    if (frames_.size() >= kMaxDepth)
      return fail(std::string("nesting deeper than ").append(std::to_string(kMaxDepth)).append(" levels"));
    frames_.push_back({last_, nullptr});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  Json root_;
  Json* last_ = nullptr;
  std::vector<Frame> frames_;
  std::string pending_key_, error_;
};

}  // namespace

Json Json::parse(const std::string& text) {
  JsonBuilder builder;
  const bool parsed = nlohmann::json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, /*strict=*/true,
                                                /*ignore_comments=*/false);
  if (!parsed) throw_error("invalid JSON", builder.error().rfind("line ", 0) == 0 ? " at " : ": ", builder.error());
  return builder.take_root();
}

}  // namespace lathe
