// A small JSON value with a strict parser and a pretty printer, for the tuning cache, benchmark
// reports and machine-readable CLI output. Parsing is RFC 8259 strict (nlohmann/json's SAX parser:
// `+1`, `01`, `1.`, comments, trailing commas, invalid UTF-8 and lone surrogates are errors), plus
// duplicate keys rejected; errors throw lathe::Error with the line and column. Integers (from
// int64_t or parsed without fraction or exponent, within int64) are kept exactly; other numbers are
// doubles and print in the shortest form that reads back to the same double (std::to_chars).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lathe {

class Json {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool value) : kind_(Kind::boolean), bool_(value) {}
  Json(int value) : Json(static_cast<int64_t>(value)) {}
  Json(int64_t value) : kind_(Kind::number), is_integer_(true), number_(static_cast<double>(value)), integer_(value) {}
  Json(double value) : kind_(Kind::number), number_(value) {}
  Json(const char* value) : kind_(Kind::string), string_(value) {}
  Json(std::string value) : kind_(Kind::string), string_(std::move(value)) {}
  static Json array() { Json j; j.kind_ = Kind::array; return j; }
  static Json object() { Json j; j.kind_ = Kind::object; return j; }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_number() const { return kind_ == Kind::number; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  bool is_integer() const { return kind_ == Kind::number && is_integer_; }  // exact int64 (see above)

  // Typed accessors throw lathe::Error naming `what` when the kind differs (as_int also when the
  // number is not an integer in int64's range).
  double as_number(const char* what = "value") const;
  int64_t as_int(const char* what = "value") const;
  bool as_bool(const char* what = "value") const;
  const std::string& as_string(const char* what = "value") const;
  const std::vector<Json>& items(const char* what = "value") const;
  const std::vector<std::pair<std::string, Json>>& members(const char* what = "value") const;

  // Objects keep insertion order. get() returns null when absent.
  Json& set(const std::string& key, Json value);
  const Json* find(const std::string& key) const;
  const Json& get(const std::string& key) const;
  Json& push(Json value);
  // Appends a member without searching for an existing key (the caller guarantees it is new):
  // O(1), for large objects such as a tokenizer vocabulary, where set() would be quadratic.
  Json& append_member(std::string key, Json value);
  size_t size() const;

  std::string dump(int indent = 2) const;  // indent 0: one line
  static Json parse(const std::string& text);

 private:
  void dump_to(std::string& out, int indent, int depth) const;

  Kind kind_ = Kind::null;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;    // every number, integers rounded
  int64_t integer_ = 0;  // exact, when is_integer_
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace lathe
