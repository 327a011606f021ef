// Sharded safetensors checkpoints: round trips (one file, shards, mixed dtypes, conversion on
// read), the writer's packing and naming, and every validation error of the index and shards
// (the tests write the corrupt files themselves).
#include "lathe/io/safetensors_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "expect_error.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream) {
  Tensor t = Tensor::empty(shape, dtype);
  if (is_floating(dtype))
    fill_normal(t, seed, 0.0, 1.0, stream);
  else
    fill_uniform(t, seed, 0.0, dtype == DType::boolean ? 2.0 : 100.0, stream);
  return t;
}

void expect_same_values(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(read_element(a, i), read_element(b, i)) << what << "[" << i << "]";
}

std::vector<std::string> directory_listing(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Fixture {
  std::vector<std::pair<std::string, Tensor>> tensors;
  NamedTensorViews views() const {
    NamedTensorViews result;
    for (const auto& [name, tensor] : tensors) result.emplace_back(name, tensor.view());
    return result;
  }
};

// Six tensors of 400 bytes each (plus small ones of other dtypes).
Fixture mixed_tensors(uint64_t seed) {
  Fixture fixture;
  fixture.tensors.emplace_back("a.weight", random_tensor({10, 10}, DType::f32, seed, 1));
  fixture.tensors.emplace_back("b.weight", random_tensor({20, 10}, DType::bf16, seed, 2));
  fixture.tensors.emplace_back("c.weight", random_tensor({100}, DType::f32, seed, 3));
  fixture.tensors.emplace_back("d.ids", random_tensor({50}, DType::i64, seed, 4));
  fixture.tensors.emplace_back("e.mask", random_tensor({400}, DType::boolean, seed, 5));
  fixture.tensors.emplace_back("f.small", random_tensor({400}, DType::i8, seed, 6));
  return fixture;
}

TEST(SafetensorsCheckpoint, OneShardIsAPlainFileWithoutIndex) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const Fixture fixture = mixed_tensors(seed);
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 0);
  EXPECT_EQ(directory_listing(scratch.path()), std::vector<std::string>{"model.safetensors"});
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  EXPECT_EQ(checkpoint.names().size(), fixture.tensors.size());
  for (const auto& [name, tensor] : fixture.tensors)
    expect_same_values(checkpoint.read_as(name, tensor.dtype()), tensor, name + " seed " + std::to_string(seed));
}

TEST(SafetensorsCheckpoint, ShardsByByteBudgetAndReadsBack) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const Fixture fixture = mixed_tensors(seed);
  // 400 + 400 fit in 800; each next tensor opens a new shard.
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 800);
  EXPECT_EQ(directory_listing(scratch.path()),
            (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  const Json index = Json::parse(read_file_contents(scratch.file("model.safetensors.index.json")));
  EXPECT_EQ(index.get("metadata").get("total_size").as_int(), 400 * 6);
  EXPECT_EQ(index.get("weight_map").get("a.weight").as_string(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(index.get("weight_map").get("b.weight").as_string(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(index.get("weight_map").get("c.weight").as_string(), "model-00002-of-00003.safetensors");
  EXPECT_EQ(index.get("weight_map").get("f.small").as_string(), "model-00003-of-00003.safetensors");
  // Opening the directory and opening the index file are the same.
  for (const std::string& path : {scratch.path(), scratch.file("model.safetensors.index.json")}) {
    const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(path);
    checkpoint.validate_all();
    EXPECT_EQ(checkpoint.shard_paths().size(), 3u);
    for (const auto& [name, tensor] : fixture.tensors)
      expect_same_values(checkpoint.read_as(name, tensor.dtype()), tensor, name + " seed " + std::to_string(seed));
  }
}

TEST(SafetensorsCheckpoint, ATensorAboveTheBudgetGetsItsOwnShard) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  Fixture fixture;
  fixture.tensors.emplace_back("small", random_tensor({4}, DType::f32, seed, 1));
  fixture.tensors.emplace_back("big", random_tensor({1000}, DType::f32, seed, 2));
  fixture.tensors.emplace_back("tail", random_tensor({4}, DType::f32, seed, 3));
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 100);
  const Json index = Json::parse(read_file_contents(scratch.file("model.safetensors.index.json")));
  EXPECT_EQ(index.get("weight_map").get("small").as_string(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(index.get("weight_map").get("big").as_string(), "model-00002-of-00003.safetensors");
  EXPECT_EQ(index.get("weight_map").get("tail").as_string(), "model-00003-of-00003.safetensors");
}

TEST(SafetensorsCheckpoint, RewritingRemovesTheEarlierSave) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const Fixture fixture = mixed_tensors(seed);
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 800);
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 0);
  EXPECT_EQ(directory_listing(scratch.path()), std::vector<std::string>{"model.safetensors"});
}

TEST(SafetensorsCheckpoint, ReadIntoConvertsFromTheMapping) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const Fixture fixture = mixed_tensors(seed);
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 800);
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  // bf16 -> f32 and f32 -> f64 are exact; integers and booleans widen exactly.
  Tensor b = Tensor::empty({20, 10}, DType::f32);
  checkpoint.read_into("b.weight", b);
  expect_same_values(b, fixture.tensors[1].second, "b.weight");
  expect_same_values(checkpoint.read_as("a.weight", DType::f64), fixture.tensors[0].second, "a.weight");
  expect_same_values(checkpoint.read_as("d.ids", DType::i32), fixture.tensors[3].second, "d.ids");
  expect_same_values(checkpoint.read_as("e.mask", DType::f32), fixture.tensors[4].second, "e.mask");
  expect_same_values(checkpoint.read_as("f.small", DType::i64), fixture.tensors[5].second, "f.small");
  // f32 -> bf16 rounds to nearest even, as convert() does.
  expect_same_values(checkpoint.read_as("a.weight", DType::bf16), convert(fixture.tensors[0].second, DType::bf16),
                     "a.weight as bf16");
  expect_error([&] { checkpoint.read_as("a.weight", DType::i32); }, "cannot be converted to i32");
  expect_error([&] { checkpoint.read_as("d.ids", DType::boolean); }, "does not fit in bool");
  Tensor wrong = Tensor::empty({10, 20}, DType::f32);
  expect_error([&] { checkpoint.read_into("b.weight", wrong); }, "has shape (20, 10), expected (10, 20)");
  expect_error([&] { checkpoint.read_as("nope", DType::f32); }, "no tensor \"nope\"");
}

// A sharded checkpoint with tensors "x" (shard 1) and "y" (shard 2), for corrupting.
std::string write_two_shards(const ScratchDirectory& scratch, uint64_t seed) {
  Fixture fixture;
  fixture.tensors.emplace_back("x", random_tensor({8}, DType::f32, seed, 1));
  fixture.tensors.emplace_back("y", random_tensor({8}, DType::f32, seed, 2));
  write_safetensors_checkpoint(scratch.path(), fixture.views(), 32);
  return scratch.file("model.safetensors.index.json");
}

void write_index(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

TEST(SafetensorsCheckpoint, IndexErrorsNameTheFileAndTensor) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const std::string index = write_two_shards(scratch, seed);
  const std::string one = "model-00001-of-00002.safetensors", two = "model-00002-of-00002.safetensors";

  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\",");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, index);
  write_index(index, "{\"metadata\": {}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, "missing object \"weight_map\"");
  write_index(index, "{\"weight_map\": {\"x\": 3}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, "tensor \"x\" maps to 3");
  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\", \"x\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, index);  // duplicate key
  write_index(index, "{\"weight_map\": {\"x\": \"../" + one + "\", \"y\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, "points outside the checkpoint directory");
  write_index(index, "{\"weight_map\": {\"x\": \"/etc/passwd\", \"y\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); }, "points outside the checkpoint directory");
  write_index(index, "{\"weight_map\": {\"x\": \"missing.safetensors\", \"y\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); },
               "shard \"missing.safetensors\" (tensor \"x\") does not exist");
}

TEST(SafetensorsCheckpoint, IndexAndShardsMustAgree) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const std::string index = write_two_shards(scratch, seed);
  const std::string one = "model-00001-of-00002.safetensors", two = "model-00002-of-00002.safetensors";

  // Listed in the index, absent from its shard.
  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\", \"y\": \"" + two + "\", \"z\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()).validate_all(); },
               "tensor \"z\" is mapped to " + scratch.file(two) + ", which does not contain it");
  write_index(index, "{\"weight_map\": {\"y\": \"" + two + "\"}}");
  SafetensorsCheckpoint only_y = SafetensorsCheckpoint::open(scratch.path());
  EXPECT_NO_THROW(only_y.validate_all());
  write_index(index, "{\"weight_map\": {\"x\": \"" + two + "\", \"y\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()).validate_all(); },
               "tensor \"x\" is mapped to " + scratch.file(two) + ", which does not contain it");
  // The same name in two shards: shard one also holds "y", which the index gives to shard two.
  Fixture both;
  both.tensors.emplace_back("x", random_tensor({8}, DType::f32, seed, 1));
  both.tensors.emplace_back("y", random_tensor({8}, DType::f32, seed, 2));
  write_safetensors(scratch.file(one), both.views());
  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\", \"y\": \"" + two + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()).validate_all(); },
               scratch.file(one) + ": tensor \"y\" is also here, but");
  // In a shard, not in the index.
  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\"}}");
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()).read_as("x", DType::f32); },
               scratch.file(one) + ": tensor \"y\" is not listed in " + index);
  // A corrupt shard is reported by the validated single-file reader, naming the shard.
  write_index(index, "{\"weight_map\": {\"x\": \"" + one + "\", \"y\": \"" + two + "\"}}");
  std::ofstream(scratch.file(two), std::ios::trunc) << "garbage";
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()).read_as("y", DType::f32); }, scratch.file(two));
}

// A safetensors file with a hand-written header.
void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  bytes += std::string(data_bytes, '\0');
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(SafetensorsCheckpoint, UnknownDtypeNamesFileAndTensor) {
  ScratchDirectory scratch;
  write_raw_safetensors(scratch.file("model.safetensors"), R"({"w":{"dtype":"U32","shape":[2],"data_offsets":[0,8]}})",
                        8);
  expect_error([&] { SafetensorsCheckpoint::open(scratch.path()); },
               scratch.file("model.safetensors") + ": tensor \"w\": dtype \"U32\" is not supported");
}

TEST(SafetensorsCheckpoint, NewIntegerDtypesReadFromForeignFiles) {
  ScratchDirectory scratch;
  // I16 [-2, 300], I8 [-5], BOOL [1, 0, 1]; offsets as another writer might lay them out.
  std::string header = R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"I8","shape":[1],"data_offsets":[4,5]},)"
                       R"("c":{"dtype":"BOOL","shape":[3],"data_offsets":[5,8]}})";
  const std::string path = scratch.file("model.safetensors");
  write_raw_safetensors(path, header, 0);
  const unsigned char data[8] = {0xfe, 0xff, 0x2c, 0x01, 0xfb, 1, 0, 1};
  std::ofstream(path, std::ios::binary | std::ios::app).write(reinterpret_cast<const char*>(data), 8);
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(path);
  const Tensor a = checkpoint.read_as("a", DType::f32), b = checkpoint.read_as("b", DType::i64);
  const Tensor c = checkpoint.read_as("c", DType::u8);
  EXPECT_EQ(to_vector<double>(a), (std::vector<double>{-2, 300}));
  EXPECT_EQ(to_vector<double>(b), (std::vector<double>{-5}));
  EXPECT_EQ(to_vector<double>(c), (std::vector<double>{1, 0, 1}));
  expect_error([&] { checkpoint.read_as("a", DType::i8); }, "element 1 (300) does not fit in i8");
}

TEST(SafetensorsCheckpoint, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("2GB", "x"), 2'000'000'000);
  EXPECT_EQ(parse_byte_size("500MB", "x"), 500'000'000);
  EXPECT_EQ(parse_byte_size("1GiB", "x"), 1073741824);
  EXPECT_EQ(parse_byte_size("1.5kb", "x"), 1500);
  EXPECT_EQ(parse_byte_size("4096", "x"), 4096);
  expect_error([] { parse_byte_size("2XB", "--max-shard-size"); }, "--max-shard-size: \"2XB\" is not a size");
  expect_error([] { parse_byte_size("", "--max-shard-size"); }, "is not a size");
  expect_error([] { parse_byte_size("GB", "--max-shard-size"); }, "is not a size");
  expect_error([] { parse_byte_size("1e30GB", "--max-shard-size"); }, "is not a size");
  expect_error([] { parse_byte_size("99999999999TB", "--max-shard-size"); }, "is not a size");
}

}  // namespace
}  // namespace lathe
