// Token shards: round trips in both token widths, atomic writes, and every header/payload
// corruption caught with a clear error naming the file.
#include "lathe/io/token_shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "lathe/core/error.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::string temporary_path(const std::string& name) {
  return ::testing::TempDir() + "lathe_shard_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<int32_t> random_tokens(size_t count, int64_t vocab_size, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<int32_t> tokens(count);
  for (auto& token : tokens) token = static_cast<int32_t>(random() % static_cast<uint64_t>(vocab_size));
  return tokens;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string open_error(const std::string& path) {
  try {
    TokenShard::open(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TokenShard, RoundTripsBothWidths) {
  for (int64_t vocab_size : {int64_t{4096}, int64_t{65536}, int64_t{100000}}) {
    std::string path = temporary_path("roundtrip.bin");
    std::vector<int32_t> tokens = random_tokens(1000, vocab_size, test_seed());
    tokens[3] = static_cast<int32_t>(vocab_size - 1);
    write_token_shard(path, tokens, vocab_size);
    int width = vocab_size <= 65536 ? 2 : 4;
    EXPECT_EQ(std::filesystem::file_size(path), 64u + 1000u * width);
    TokenShard shard = TokenShard::open(path);
    EXPECT_EQ(shard.size(), 1000);
    EXPECT_EQ(shard.vocab_size(), vocab_size);
    EXPECT_EQ(shard.bytes_per_token(), width);
    EXPECT_EQ(shard.token(3), vocab_size - 1);
    EXPECT_EQ(shard.tokens(0, 1000), tokens) << "seed " << test_seed();
    EXPECT_EQ(shard.tokens(17, 5), std::vector<int32_t>(tokens.begin() + 17, tokens.begin() + 22));
    TokenShard moved = std::move(shard);
    EXPECT_EQ(moved.token(999), tokens[999]);
    std::remove(path.c_str());
  }
}

TEST(TokenShard, EmptyShardAndNoLeftoverTemporaryFile) {
  std::string path = temporary_path("empty.bin");
  write_token_shard(path, {}, 10);
  EXPECT_EQ(TokenShard::open(path).size(), 0);
  std::string folder = std::filesystem::path(path).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos) << entry.path();
  std::remove(path.c_str());
}

TEST(TokenShard, WriteRejectsTokensOutsideTheVocabulary) {
  std::string path = temporary_path("bad_token.bin");
  std::vector<int32_t> tokens = {1, 2, 10};
  EXPECT_THROW(write_token_shard(path, tokens, 10), Error);
  tokens[2] = -1;
  EXPECT_THROW(write_token_shard(path, tokens, 10), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TokenShard, CorruptionGivesClearErrors) {
  std::string path = temporary_path("corrupt.bin");
  write_token_shard(path, random_tokens(100, 500, test_seed()), 500);
  const std::string good = read_bytes(path);
  auto expect = [&](const std::string& bytes, const std::string& expected) {
    write_bytes(path, bytes);
    std::string message = open_error(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  expect(good.substr(0, 10), "too short");
  std::string bad = good;
  bad[0] = 'X';
  expect(bad, "bad magic");
  bad = good;
  bad[8] = 2;  // version 2
  expect(bad, "version 2");
  bad = good;
  bad[16] ^= 1;  // token count 101 or 99
  expect(bad, "header checksum");
  expect(good.substr(0, good.size() - 1), "truncated");
  expect(good + "xx", "payload bytes");
  bad = good;
  bad[64 + 50] ^= 0x40;
  expect(bad, "payload checksum");
  std::remove(path.c_str());
  EXPECT_NE(open_error(path).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace lathe
