// Decoding gzip / zstd files as a stream: round trips on random text of awkward sizes (pieces of
// any size, across the 64 KiB input piece), concatenated members, detection by the first bytes,
// and one clear error naming the file for truncated, corrupt or misnamed input.
#include "lathe/io/compressed_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "compress_for_tests.h"
#include "expect_error.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Lines of random printable text; `size` bytes in all.
std::string random_text(std::mt19937_64& random, size_t size) {
  std::string text(size, ' ');
  for (char& c : text) c = random() % 13 == 0 ? '\n' : static_cast<char>('!' + random() % 90);
  return text;
}

std::string read_in_pieces(const std::string& path, size_t piece) {
  CompressedFileReader reader(path);
  std::string text, buffer(piece, '\0');
  while (size_t got = reader.read(buffer.data(), buffer.size())) text.append(buffer.data(), got);
  return text;
}

TEST(CompressedFile, RoundTripsGzipZstdAndPlainInAnyPieceSize) {
  ScratchDirectory scratch;
  std::mt19937_64 random(test_seed());
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{200'001}}) {
    SCOPED_TRACE("seed " + std::to_string(test_seed()) + ", size " + std::to_string(size));
    const std::string text = random_text(random, size);
    const std::string gz = write_file(scratch.file("t.gz"), gzip_compress(text));
    const std::string zst = write_file(scratch.file("t.zst"), zstd_compress(text));
    EXPECT_EQ(CompressedFileReader(gz).compression(), Compression::gzip);
    EXPECT_EQ(CompressedFileReader(zst).compression(), Compression::zstd);
    for (const std::string& path : {gz, zst}) {
      EXPECT_EQ(read_decoded_file(path), text);
      EXPECT_EQ(read_in_pieces(path, 1 + random() % 70'000), text);
    }
    if (size > 0) {  // plain text read through the same reader, unchanged
      const std::string plain = write_file(scratch.file("t.txt"), text);
      EXPECT_EQ(CompressedFileReader(plain).compression(), Compression::none);
      EXPECT_EQ(read_in_pieces(plain, 1 + random() % 70'000), text);
    }
  }
}

TEST(CompressedFile, CompressionIsRecognisedByTheFirstBytesAndMembersConcatenate) {
  ScratchDirectory scratch;
  // A gzip file without the .gz name is still gzip.
  const std::string unnamed = write_file(scratch.file("corpus"), gzip_compress("hello\n"));
  EXPECT_EQ(read_decoded_file(unnamed), "hello\n");
  const std::string members = write_file(scratch.file("two.gz"), gzip_compress("one\n") + gzip_compress("two\n"));
  EXPECT_EQ(read_decoded_file(members), "one\ntwo\n");
  const std::string frames = write_file(scratch.file("two.zst"), zstd_compress("one\n") + zstd_compress("two\n"));
  EXPECT_EQ(read_decoded_file(frames), "one\ntwo\n");
  EXPECT_EQ(compression_from_name("a.jsonl.gz"), Compression::gzip);
  EXPECT_EQ(compression_from_name("a.txt.zstd"), Compression::zstd);
  EXPECT_EQ(compression_from_name("a.gzip.txt"), Compression::none);
  EXPECT_EQ(name_without_compression("dir.gz/a.jsonl.zst"), "dir.gz/a.jsonl");
}

TEST(CompressedFile, LinesAreNumberedAcrossPiecesWithoutTheirEnds) {
  ScratchDirectory scratch;
  std::string text;
  std::vector<std::string> expected;
  for (int i = 0; i < 30'000; ++i) {  // about 300 KB decoded: several input and output pieces
    expected.push_back("line " + std::to_string(i) + std::string(static_cast<size_t>(i % 7), 'x'));
    text += expected.back() + (i % 3 == 0 ? "\r\n" : "\n");
  }
  expected.push_back("no newline at the end");
  text += expected.back();
  for (const std::string& path : {write_file(scratch.file("l.zst"), zstd_compress(text)),
                                  write_file(scratch.file("l.gz"), gzip_compress(text))}) {
    std::vector<std::string> lines;
    for_each_decoded_line(path, [&](std::string_view line, int64_t number) {
      EXPECT_EQ(number, static_cast<int64_t>(lines.size()) + 1);
      lines.emplace_back(line);
    });
    EXPECT_EQ(lines, expected) << path;
  }
}

TEST(CompressedFile, TruncatedCorruptAndMisnamedFilesAreOneErrorNamingTheFile) {
  ScratchDirectory scratch;
  std::mt19937_64 random(test_seed());
  const std::string text = random_text(random, 100'000);
  const std::string gz = gzip_compress(text), zst = zstd_compress(text);
  const std::string cut_gz = write_file(scratch.file("cut.txt.gz"), gz.substr(0, gz.size() / 2));
  expect_error([&] { read_decoded_file(cut_gz); }, cut_gz + ": truncated gzip file");
  const std::string cut_zst = write_file(scratch.file("cut.txt.zst"), zst.substr(0, zst.size() / 2));
  expect_error([&] { read_decoded_file(cut_zst); }, cut_zst + ": truncated zstd file");
  // The last byte: inside gzip's length trailer / zstd's checksum.
  expect_error([&] { read_decoded_file(write_file(scratch.file("end.gz"), gz.substr(0, gz.size() - 1))); },
               "truncated gzip file");
  expect_error([&] { read_decoded_file(write_file(scratch.file("end.zst"), zst.substr(0, zst.size() - 1))); },
               "truncated zstd file");
  std::string bad_gz = gz, bad_zst = zst;
  bad_gz[bad_gz.size() / 2] ^= 0x55;
  bad_zst[bad_zst.size() / 2] ^= 0x55;
  const std::string corrupt_gz = write_file(scratch.file("bad.gz"), bad_gz);
  expect_error([&] { read_decoded_file(corrupt_gz); }, corrupt_gz + ": corrupt gzip data (");
  const std::string corrupt_zst = write_file(scratch.file("bad.zst"), bad_zst);
  expect_error([&] { read_decoded_file(corrupt_zst); }, corrupt_zst + ": corrupt zstd data (");
  const std::string trailing = write_file(scratch.file("trailing.gz"), gz + "junk");
  expect_error([&] { read_decoded_file(trailing); }, trailing + ": corrupt gzip data (");
  const std::string misnamed = write_file(scratch.file("plain.gz"), "plain text\n");
  expect_error([&] { read_decoded_file(misnamed); },
               misnamed + ": the name says gzip but the file does not start like gzip data");
  const std::string empty = write_file(scratch.file("empty.zst"), "");
  expect_error([&] { read_decoded_file(empty); }, "does not start like zstd data (it is empty)");
  expect_error([&] { read_decoded_file(scratch.file("missing.gz")); }, "missing.gz: cannot open for reading");
}

}  // namespace
}  // namespace lathe
