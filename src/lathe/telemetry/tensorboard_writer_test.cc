// Event files read back through our own TFRecord and protobuf parsers (the Python test checks them
// with TensorBoard's reader): framing, CRCs, field values, corruption detection.
#include "lathe/telemetry/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "lathe/core/error.h"
#include "lathe/telemetry/protobuf_wire.h"
#include "lathe/telemetry/tfrecord.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

fs::path fresh_directory(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("lathe_tb_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

struct DecodedScalar {
  double wall_time;
  int64_t step;
  std::string tag;
  float value;
};

DecodedScalar decode_scalar(const std::string& event) {
  auto fields = parse_proto_fields(event);
  const ProtoField* summary = find_proto_field(fields, 5);
  EXPECT_NE(summary, nullptr);
  auto summary_fields = parse_proto_fields(summary->payload);
  EXPECT_EQ(summary_fields.size(), 1u);
  auto value_fields = parse_proto_fields(summary_fields.at(0).payload);
  DecodedScalar decoded;
  decoded.wall_time = find_proto_field(fields, 1)->as_double();
  decoded.step = find_proto_field(fields, 2)->as_int64();
  decoded.tag = std::string(find_proto_field(value_fields, 1)->payload);
  EXPECT_EQ(find_proto_field(value_fields, 2)->wire_type, WireType::fixed32);
  decoded.value = find_proto_field(value_fields, 2)->as_float();
  return decoded;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

TEST(TensorBoardWriter, WritesVersionEventThenScalarsThatParseBack) {
  fs::path dir = fresh_directory("scalars");
  std::string path;
  {
    TensorBoardWriter writer(dir.string());
    path = writer.path();
    writer.add_scalar("train/loss", 3.25, 0, 1700000000.5);
    writer.add_scalar("train/loss", -1e30, 7, 1700000001.25);
    writer.add_scalar("lr", 0.1, int64_t{1} << 40, 1700000002.0);  // 0.1 is not a float: rounds
    writer.add_scalar("negative_step", 2.0, -3, 1700000003.0);
  }
  ASSERT_EQ(event_files(dir), std::vector<fs::path>{fs::path(path)});
  std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find("." + std::to_string(getpid())), std::string::npos) << name;

  auto events = read_tfrecord_file(path);
  ASSERT_EQ(events.size(), 5u);
  auto first = parse_proto_fields(events[0]);
  ASSERT_NE(find_proto_field(first, 3), nullptr);
  EXPECT_EQ(find_proto_field(first, 3)->payload, "brain.Event:2");
  EXPECT_NEAR(find_proto_field(first, 1)->as_double(), unix_time_now(), 60.0);

  DecodedScalar loss0 = decode_scalar(events[1]), loss7 = decode_scalar(events[2]);
  DecodedScalar lr = decode_scalar(events[3]), negative = decode_scalar(events[4]);
  EXPECT_EQ(loss0.tag, "train/loss");
  EXPECT_EQ(loss0.step, 0);
  EXPECT_EQ(loss0.value, 3.25f);
  EXPECT_EQ(loss0.wall_time, 1700000000.5);
  EXPECT_EQ(loss7.step, 7);
  EXPECT_EQ(loss7.value, -1e30f);
  EXPECT_EQ(loss7.wall_time, 1700000001.25);
  EXPECT_EQ(lr.tag, "lr");
  EXPECT_EQ(lr.step, int64_t{1} << 40);
  EXPECT_EQ(lr.value, 0.1f);
  EXPECT_EQ(negative.step, -3);
  fs::remove_all(dir);
}

TEST(TensorBoardWriter, KnownScalarEventBytes) {
  // Hand-assembled from the proto definitions: Event{wall_time=1 (fixed64), step=2 (varint),
  // summary=5 {value=1 {tag=1 "a", simple_value=2 (fixed32)}}}.
  std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9)  // 1.0
                         + std::string("\x10\x96\x01", 3)                        // 150
                         + std::string(
                               "\x2a\x0a\x0a\x08\x0a\x01"
                               "a"
                               "\x15\x00\x00\xc0\x3f",
                               12);  // 1.5f
  EXPECT_EQ(encode_scalar_event("a", 1.5f, 150, 1.0), expected);
}

TEST(TensorBoardWriter, TextEventCarriesTheTextPluginAndAStringTensor) {
  std::string event = encode_text_event("config", "lr: 3e-3", 5, 2.0);
  auto fields = parse_proto_fields(event);
  auto value = parse_proto_fields(parse_proto_fields(find_proto_field(fields, 5)->payload).at(0).payload);
  EXPECT_EQ(find_proto_field(value, 1)->payload, "config");
  auto plugin = parse_proto_fields(parse_proto_fields(find_proto_field(value, 9)->payload).at(0).payload);
  EXPECT_EQ(find_proto_field(plugin, 1)->payload, "text");
  auto tensor = parse_proto_fields(find_proto_field(value, 8)->payload);
  EXPECT_EQ(find_proto_field(tensor, 1)->bits, 7u);  // DT_STRING
  EXPECT_EQ(find_proto_field(tensor, 8)->payload, "lr: 3e-3");
}

TEST(TensorBoardWriter, EveryFlippedByteIsDetected) {
  fs::path dir = fresh_directory("flip");
  std::string path;
  {
    TensorBoardWriter writer(dir.string());
    path = writer.path();
    writer.add_scalar("loss", 2.5, 1, 1.0);
  }
  std::string good = read_bytes(path);
  ASSERT_EQ(parse_tfrecords(good, path).size(), 2u);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    EXPECT_THROW(parse_tfrecords(bad, path), Error) << "flipped byte " << i << " went unnoticed";
  }
  try {
    parse_tfrecords(good.substr(0, good.size() - 1), path);
    ADD_FAILURE() << "truncated file accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("record 1"), std::string::npos) << error.what();
  }
  fs::remove_all(dir);
}

TEST(TensorBoardWriter, TwoWritersInOneDirectoryGetTwoFiles) {
  fs::path dir = fresh_directory("two");
  {
    TensorBoardWriter first(dir.string()), second(dir.string());
    EXPECT_NE(first.path(), second.path());
    first.add_text("note", "hello", 0);
    second.close();
    EXPECT_THROW(second.add_scalar("x", 1, 0), Error);
  }
  EXPECT_EQ(event_files(dir).size(), 2u);
  fs::remove_all(dir);
}

TEST(TensorBoardWriter, UnwritableDirectoryIsAnErrorNamingIt) {
  fs::path dir = fresh_directory("blocked");
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "not a directory";
  std::string log_dir = (dir / "file" / "tb").string();
  try {
    TensorBoardWriter writer(log_dir);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(log_dir), std::string::npos) << error.what();
  }
  fs::remove_all(dir);
}

TEST(ProtobufWire, TruncatedOrUnknownInputThrows) {
  EXPECT_THROW(parse_proto_fields(std::string("\x0a\x05"
                                              "ab",
                                              4)),
               Error);                                                  // claims 5 bytes
  EXPECT_THROW(parse_proto_fields(std::string("\x08\x80", 2)), Error);  // unfinished varint
  EXPECT_THROW(parse_proto_fields(std::string("\x0b", 1)), Error);      // wire type 3 (groups)
  EXPECT_EQ(parse_proto_fields("").size(), 0u);
}

TEST(TfRecord, CrcMaskRoundTripsAndMatchesTheTfRecordFormula) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) {
    uint32_t masked = mask_crc32c(crc);
    EXPECT_EQ(masked, static_cast<uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
    EXPECT_EQ(unmask_crc32c(masked), crc);
  }
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
}

}  // namespace
}  // namespace lathe
