#include "lathe/io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>

#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file built by hand from the format description: length, header text, buffer.
std::string raw_safetensors(const std::string& header, const std::string& buffer,
                            std::optional<uint64_t> length_field = std::nullopt) {
  uint64_t length = length_field.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
  return bytes + header + buffer;
}

// Expects open() to throw lathe::Error whose message names the file and contains every part.
void expect_open_error(const std::string& path, std::initializer_list<const char*> parts) {
  try {
    SafetensorsFile::open(path);
    ADD_FAILURE() << "expected an error opening " << path;
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const char* part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream) {
  Tensor tensor = Tensor::empty(shape, dtype);
  if (is_floating(dtype))
    fill_uniform(tensor, seed, -10, 10, stream);
  else
    fill_uniform(tensor, seed, 0, 250, stream);
  return tensor;
}

TEST(Safetensors, RoundTripsEveryDtypeBitExactlyWithMetadataAndOrder) {
  uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const DType dtypes[] = {DType::u8,  DType::f64, DType::bf16, DType::i32,
                          DType::f16, DType::i64, DType::f32,  DType::u16};
  std::vector<Tensor> tensors;
  NamedTensorViews entries;
  for (int i = 0; i < 8; ++i) {
    Shape shape;
    int rank = 1 + i % 3;
    for (int axis = 0; axis < rank; ++axis) shape.push_back(1 + int64_t(uniform_at(seed, 100 + i, axis) * 9));
    tensors.push_back(random_tensor(shape, dtypes[i], seed, i));
    entries.emplace_back(str_cat("layer.", i, ".", dtype_name(dtypes[i])), tensors.back());
  }
  Tensor scalar = random_tensor(Shape{}, DType::f32, seed, 50);  // rank 0: one element
  Tensor empty = Tensor::empty(Shape{0, 5}, DType::bf16);
  entries.emplace_back("scalar", scalar);
  entries.emplace_back("empty", empty);
  std::string path = scratch.file("model.safetensors");
  FileDigest digest = write_safetensors(path, entries, {{"format", "pt"}, {"note", "x\"y"}});

  std::string bytes = read_bytes(path);
  EXPECT_EQ(digest.bytes, static_cast<int64_t>(bytes.size()));
  SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<std::string> expected_names;
  for (const auto& entry : entries) expected_names.push_back(entry.first);
  EXPECT_EQ(file.names(), expected_names);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "x\"y");
  EXPECT_EQ(file.find("absent"), nullptr);
  for (const auto& [name, original] : entries) {
    const SafetensorsTensorInfo* info = file.find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, original.dtype) << name;
    EXPECT_EQ(info->shape, original.shape) << name;
    // Aligned to the element size, so view() works for every tensor our writer lays out.
    TensorView view = file.view(name);
    size_t byte_count = static_cast<size_t>(original.numel() * dtype_size(original.dtype));
    EXPECT_EQ(std::memcmp(view.data, original.data, byte_count), 0) << name << " seed=" << seed;
    Tensor copy = file.read(name);
    EXPECT_EQ(std::memcmp(copy.view().data, original.data, byte_count), 0) << name;
  }
}

TEST(Safetensors, HeaderFollowsTheFormatAsAnIndependentParserSeesIt) {
  ScratchDirectory scratch;
  Tensor small = Tensor::zeros(Shape{3}, DType::u8);
  Tensor wide = Tensor::zeros(Shape{2, 2}, DType::f64);
  Tensor half = Tensor::zeros(Shape{5}, DType::f16);
  std::string path = scratch.file("x.safetensors");
  write_safetensors(path, {{"small", small}, {"wide", wide}, {"half", half}});
  std::string bytes = read_bytes(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(length % 8, 0u);  // the data buffer starts 8-byte aligned
  Json header = Json::parse(bytes.substr(8, length));
  EXPECT_EQ(header.get("wide").get("dtype").as_string(), "F64");
  // Larger elements first: f64 at 0, f16 next, u8 last; the buffer is exactly covered.
  EXPECT_EQ(header.get("wide").get("data_offsets").items()[0].as_int(), 0);
  EXPECT_EQ(header.get("half").get("data_offsets").items()[0].as_int(), 32);
  EXPECT_EQ(header.get("small").get("data_offsets").items()[0].as_int(), 42);
  EXPECT_EQ(header.get("small").get("data_offsets").items()[1].as_int(), 45);
  EXPECT_EQ(bytes.size(), 8 + length + 45);
  EXPECT_EQ(header.get("small").get("shape").items()[0].as_int(), 3);
  // No temporary file is left next to the target.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(scratch.path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(Safetensors, ReadsAHandBuiltFileIncludingAMisalignedTensor) {
  ScratchDirectory scratch;
  float values[2] = {1.5f, -2.0f};
  std::string buffer(reinterpret_cast<const char*>(values), 8);
  buffer += std::string("\x01\x02\x03", 3);
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  write_bytes(scratch.file("ok"), raw_safetensors(header, buffer));
  SafetensorsFile file = SafetensorsFile::open(scratch.file("ok"));
  EXPECT_EQ(file.read("a").ptr<float>()[1], -2.0f);
  EXPECT_EQ(file.read("b").ptr<uint8_t>()[2], 3);

  // An f32 tensor at byte 1 of an 8-byte aligned buffer: view() refuses, read_as() copies.
  std::string misaligned_header =
      R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  misaligned_header.append((8 - misaligned_header.size() % 8) % 8, ' ');
  write_bytes(scratch.file("misaligned"),
              raw_safetensors(misaligned_header,
                              std::string("\x07", 1) + std::string(reinterpret_cast<const char*>(values), 8)));
  SafetensorsFile misaligned = SafetensorsFile::open(scratch.file("misaligned"));
  EXPECT_THROW(misaligned.view("f"), Error);
  Tensor copy = misaligned.read_as("f", DType::f64);
  EXPECT_EQ(copy.ptr<double>()[0], 1.5);
  EXPECT_EQ(copy.ptr<double>()[1], -2.0);

  // A header with metadata only and no tensors is a valid (empty) file.
  write_bytes(scratch.file("empty"), raw_safetensors(R"({"__metadata__":{"k":"v"}})", ""));
  EXPECT_TRUE(SafetensorsFile::open(scratch.file("empty")).names().empty());
}

TEST(Safetensors, ReadAsConvertsFloatsWithRoundToNearestEvenAndNoDoubleRounding) {
  ScratchDirectory scratch;
  Tensor f32 = Tensor::empty(Shape{4}, DType::f32);
  float inputs[4] = {1.0f + 1.0f / 256 + 1.0f / 65536, -3.14159f, 65504.0f * 2, 1e-30f};
  std::memcpy(f32.view().data, inputs, sizeof inputs);
  // f64 values just above a bf16 / f16 rounding midpoint, by less than a float can represent:
  // a double -> float -> bf16 conversion would land on the midpoint and round down (to even).
  Tensor f64 = Tensor::empty(Shape{2}, DType::f64);
  f64.ptr<double>()[0] = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  f64.ptr<double>()[1] = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  Tensor ints = Tensor::zeros(Shape{2}, DType::i32);
  std::string path = scratch.file("c.safetensors");
  write_safetensors(path, {{"f32", f32}, {"f64", f64}, {"ints", ints}});
  SafetensorsFile file = SafetensorsFile::open(path);

  Tensor as_bf16 = file.read_as("f32", DType::bf16);
  Tensor as_f16 = file.read_as("f32", DType::f16);
  Tensor as_f64 = file.read_as("f32", DType::f64);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(as_bf16.ptr<bf16>()[i].bits, float_to_bf16(inputs[i]).bits) << i;
    EXPECT_EQ(as_f16.ptr<f16>()[i].bits, float_to_f16(inputs[i]).bits) << i;
    EXPECT_EQ(as_f64.ptr<double>()[i], static_cast<double>(inputs[i])) << i;
  }
  EXPECT_EQ(file.read_as("f64", DType::bf16).ptr<bf16>()[0].bits, 0x3F81);  // 1 + 2^-7
  EXPECT_EQ(file.read_as("f64", DType::f16).ptr<f16>()[1].bits, 0x3C01);    // 1 + 2^-10
  EXPECT_EQ(file.read_as("ints", DType::i32).ptr<int32_t>()[1], 0);
  // Integers convert exactly to any dtype that holds them; floating types never to integers.
  const Tensor ints_as_i32 = file.read_as("ints", DType::i32), ints_as_f64 = file.read_as("ints", DType::f64);
  EXPECT_EQ(to_vector<double>(ints_as_f64), to_vector<double>(ints_as_i32));
  EXPECT_THROW(file.read_as("f32", DType::i32), Error);
  EXPECT_THROW(file.read_as("absent", DType::f32), Error);
}

TEST(Safetensors, WritesNonContiguousViewsRowMajor) {
  ScratchDirectory scratch;
  Tensor matrix = random_tensor(Shape{3, 5}, DType::f32, test_seed(), 1);
  TensorView transposed = matrix.view().transpose(0, 1);
  TensorView strided = matrix.view().slice(1, 1, 4);
  std::string path = scratch.file("t.safetensors");
  write_safetensors(path, {{"t", transposed}, {"s", strided}});
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.info("t").shape, (Shape{5, 3}));
  EXPECT_EQ(to_vector<float>(file.view("t")), to_vector<float>(transposed));
  EXPECT_EQ(to_vector<float>(file.view("s")), to_vector<float>(strided));
}

TEST(Safetensors, WriteRejectsBadNamesAndUnwritablePathsCleanly) {
  ScratchDirectory scratch;
  Tensor x = Tensor::zeros(Shape{2}, DType::f32);
  EXPECT_THROW(write_safetensors(scratch.file("a"), {{"x", x}, {"x", x}}), Error);
  EXPECT_THROW(write_safetensors(scratch.file("a"), {{"", x}}), Error);
  EXPECT_THROW(write_safetensors(scratch.file("a"), {{"__metadata__", x}}), Error);
  try {
    write_safetensors(scratch.file("no/such/dir/a.safetensors"), {{"x", x}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no/such/dir"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(scratch.path()));
  // Overwriting replaces the old file.
  write_safetensors(scratch.file("b"), {{"x", x}});
  write_safetensors(scratch.file("b"), {{"y", x}});
  EXPECT_EQ(SafetensorsFile::open(scratch.file("b")).names(), std::vector<std::string>{"y"});
}

TEST(Safetensors, RejectsEveryMalformedHeaderWithANamedError) {
  ScratchDirectory scratch;
  const std::string eight(8, '\0'), eleven(11, '\0');
  struct Case {
    const char* header;
    std::string buffer;
    std::initializer_list<const char*> parts;
  };
  const Case cases[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight, {"\"a\"", "backwards"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", std::string(12, '\0'), {"\"a\"", "needs 8"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
       eleven,
       {"\"b\"", "exceed"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[3],"data_offsets":[6,9]}})",
       eleven,
       {"\"b\"", "overlap", "\"a\""}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[3],"data_offsets":[9,12]}})",
       std::string(12, '\0'),
       {"\"b\"", "no tensor"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(9, '\0'), {"end of the data buffer"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       eight,
       {"duplicate key \"a\""}},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight, {"\"a\"", "non-negative"}},
      {R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight, {"\"a\"", "integer"}},
      {R"({"a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,8]}})", eight, {"\"a\"", "integer"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight, {"\"a\"", "begin"}},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight, {"\"a\"", "too large"}},
      {R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", eight, {"\"a\"", "F8_E4M3"}},
      {R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,2],"data_offsets":[0,8]}})", eight, {"\"a\"", "rank 7"}},
      {R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight, {"\"a\"", "dtype"}},
      {R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight, {"\"a\"", "dtype"}},
      {R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight, {"\"a\"", "shape"}},
      {R"({"a":{"dtype":"F32","shape":[2]}})", eight, {"\"a\"", "data_offsets"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", eight, {"\"a\"", "data_offsets"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})", eight, {"\"a\"", "integer"}},
      {R"({"a":[1,2]})", eight, {"\"a\"", "object"}},
      {R"({"__metadata__":{"k":1}})", "", {"\"k\"", "string"}},
      {R"({"__metadata__":"k"})", "", {"__metadata__"}},
      {R"([1,2])", "", {"object"}},
      {R"({"a": )", "", {"invalid JSON"}},
      {"\xff\xfe garbage", "", {"invalid JSON"}},
      {"", "", {"invalid JSON"}},
  };
  int index = 0;
  for (const Case& c : cases) {
    std::string path = scratch.file(str_cat("case", index++));
    write_bytes(path, raw_safetensors(c.header, c.buffer));
    SCOPED_TRACE(c.header);
    expect_open_error(path, c.parts);
  }
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_bytes(scratch.file("deep"), raw_safetensors(deep, ""));
  expect_open_error(scratch.file("deep"), {"nesting"});
  // Length fields that point past the end of the file, or absurdly far.
  write_bytes(scratch.file("long"), raw_safetensors("{}", "", 1000));
  expect_open_error(scratch.file("long"), {"header length 1000"});
  write_bytes(scratch.file("huge"), raw_safetensors("{}", "", ~uint64_t{0}));
  expect_open_error(scratch.file("huge"), {"header length"});
  write_bytes(scratch.file("empty"), "");
  expect_open_error(scratch.file("empty"), {"too short"});
  write_bytes(scratch.file("seven"), std::string(7, '\x02'));
  expect_open_error(scratch.file("seven"), {"too short"});
  expect_open_error(scratch.file("missing"), {"cannot open"});
  expect_open_error(scratch.path(), {"regular file"});
}

// Opening must either succeed (and then every tensor reads inside the mapping) or throw
// lathe::Error: never crash or read out of bounds (run under ASan/UBSan in CI).
void open_and_read_everything(const std::string& path) {
  try {
    SafetensorsFile file = SafetensorsFile::open(path);
    for (const std::string& name : file.names()) {
      Tensor copy = file.read(name);
      if (is_floating(copy.dtype())) file.read_as(name, DType::f64);
    }
  } catch (const Error&) {
  }
}

TEST(Safetensors, SurvivesEveryTruncationAndRandomCorruption) {
  uint64_t seed = test_seed();
  ScratchDirectory scratch;
  Tensor a = random_tensor(Shape{3, 4}, DType::f32, seed, 1);
  Tensor b = random_tensor(Shape{5}, DType::bf16, seed, 2);
  Tensor c = random_tensor(Shape{2, 3}, DType::i64, seed, 3);
  std::string path = scratch.file("good");
  write_safetensors(path, {{"a", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});
  std::string good = read_bytes(path);
  std::string bad = scratch.file("bad");
  for (size_t length = 0; length < good.size(); ++length) {
    write_bytes(bad, good.substr(0, length));
    EXPECT_THROW(SafetensorsFile::open(bad), Error) << "truncated to " << length;
  }
  uint64_t header_end = 8;
  for (int i = 0; i < 8; ++i) header_end += uint64_t(static_cast<unsigned char>(good[i])) << (8 * i);
  for (int trial = 0; trial < 400; ++trial) {
    std::string corrupt = good;
    int flips = 1 + trial % 3;
    for (int flip = 0; flip < flips; ++flip) {
      // Mostly in the length field and header, where the parser is exercised.
      size_t limit = trial % 4 == 0 ? corrupt.size() : header_end;
      size_t position = size_t(uniform_at(seed, 1000 + trial, flip) * limit);
      corrupt[position] = static_cast<char>(uniform_at(seed, 2000 + trial, flip) * 256);
    }
    write_bytes(bad, corrupt);
    open_and_read_everything(bad);
  }
}

}  // namespace
}  // namespace lathe
