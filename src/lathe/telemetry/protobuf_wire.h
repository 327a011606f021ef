// The protocol-buffer wire format, by hand: enough to write and read back small messages
// (TensorBoard's Event/Summary) without a protobuf library. Fields are (number << 3 | wire type)
// keys followed by a varint, 8 or 4 little-endian bytes, or a length-prefixed byte string
// (strings, bytes and nested messages alike).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// Appends fields to a message in call order.
class ProtoWriter {
 public:
  void add_varint(int field, uint64_t value);         // int64 (negatives: 10 bytes), enum, bool
  void add_double(int field, double value);           // wire type 1
  void add_float(int field, float value);             // wire type 5
  void add_bytes(int field, std::string_view value);  // string, bytes
  void add_message(int field, const ProtoWriter& message) { add_bytes(field, message.bytes()); }
  const std::string& bytes() const { return bytes_; }

 private:
  void append_varint(uint64_t value);
  std::string bytes_;
};

enum class WireType : int { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

// One field of a parsed message. `bits` holds the varint or the raw fixed-size bits; `payload`
// points into the parsed buffer for length-delimited fields.
struct ProtoField {
  int number = 0;
  WireType wire_type = WireType::varint;
  uint64_t bits = 0;
  std::string_view payload;

  double as_double() const;  // fixed64
  float as_float() const;    // fixed32
  int64_t as_int64() const { return static_cast<int64_t>(bits); }
};

// Splits a message into its fields (nested messages stay as payloads, parse them again).
// Throws lathe::Error naming the byte offset on truncated input or an unsupported wire type.
std::vector<ProtoField> parse_proto_fields(std::string_view message);

// The first field with this number, or nullptr.
const ProtoField* find_proto_field(const std::vector<ProtoField>& fields, int number);

}  // namespace lathe
