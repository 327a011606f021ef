#include "lathe/telemetry/protobuf_wire.h"

#include <cstring>

#include "lathe/core/error.h"

namespace lathe {

void ProtoWriter::append_varint(uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<char>(value));
}

void ProtoWriter::add_varint(int field, uint64_t value) {
  append_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(WireType::varint));
  append_varint(value);
}

void ProtoWriter::add_double(int field, double value) {
  append_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(WireType::fixed64));
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>(bits >> (8 * i)));
}

void ProtoWriter::add_float(int field, float value) {
  append_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(WireType::fixed32));
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>(bits >> (8 * i)));
}

void ProtoWriter::add_bytes(int field, std::string_view value) {
  append_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(WireType::length_delimited));
  append_varint(value.size());
  bytes_.append(value);
}

double ProtoField::as_double() const {
  double value;
  std::memcpy(&value, &bits, 8);
  return value;
}

float ProtoField::as_float() const {
  uint32_t low = static_cast<uint32_t>(bits);
  float value;
  std::memcpy(&value, &low, 4);
  return value;
}

namespace {

struct Reader {
  std::string_view data;
  size_t offset = 0;

  uint64_t read_varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      LATHE_CHECK(offset < data.size(), "protobuf: truncated varint at byte ", offset);
      auto byte = static_cast<unsigned char>(data[offset++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw_error("protobuf: varint longer than 10 bytes at byte ", offset);
  }

  uint64_t read_little_endian(int size) {
    LATHE_CHECK(data.size() - offset >= static_cast<size_t>(size), "protobuf: truncated ", size, "-byte field at byte ",
                offset);
    uint64_t value = 0;
    for (int i = 0; i < size; ++i)
      value |= static_cast<uint64_t>(static_cast<unsigned char>(data[offset + i])) << (8 * i);
    offset += size;
    return value;
  }
};

}  // namespace

std::vector<ProtoField> parse_proto_fields(std::string_view message) {
  std::vector<ProtoField> fields;
  Reader reader{message};
  while (reader.offset < message.size()) {
    size_t key_offset = reader.offset;
    uint64_t key = reader.read_varint();
    ProtoField field;
    field.number = static_cast<int>(key >> 3);
    LATHE_CHECK(field.number > 0, "protobuf: field number 0 at byte ", key_offset);
    switch (key & 7) {
      case 0:
        field.wire_type = WireType::varint;
        field.bits = reader.read_varint();
        break;
      case 1:
        field.wire_type = WireType::fixed64;
        field.bits = reader.read_little_endian(8);
        break;
      case 5:
        field.wire_type = WireType::fixed32;
        field.bits = reader.read_little_endian(4);
        break;
      case 2: {
        field.wire_type = WireType::length_delimited;
        uint64_t size = reader.read_varint();
        LATHE_CHECK(size <= message.size() - reader.offset, "protobuf: field ", field.number, " at byte ", key_offset,
                    " claims ", size, " bytes, only ", message.size() - reader.offset, " left");
        field.payload = message.substr(reader.offset, size);
        reader.offset += size;
        break;
      }
      default:
        throw_error("protobuf: unsupported wire type ", key & 7, " at byte ", key_offset);
    }
    fields.push_back(field);
  }
  return fields;
}

const ProtoField* find_proto_field(const std::vector<ProtoField>& fields, int number) {
  for (const auto& field : fields)
    if (field.number == number) return &field;
  return nullptr;
}

}  // namespace lathe
