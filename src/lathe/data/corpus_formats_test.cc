// Corpus formats: JSONL (the text member of each line, a custom field, one error per bad line with
// FILE:LINE), gzip / zstd compressed text and JSONL decoded as streams, folders that mix them, and
// one clear error naming the file for corrupt or truncated compressed input (also inside a folder).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compress_for_tests.h"
#include "lathe/core/error.h"
#include "lathe/data/corpus.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

using Documents = std::vector<std::string>;

std::string write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string error_of(const std::string& path, const std::string& field = "text") {
  try {
    read_corpus(path, nullptr, field);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

// Three documents, a blank line, other members and escapes, CRLF on one line.
const std::string kJsonl =
    "{\"text\": \"first doc\\nwith two lines\", \"id\": 1}\n"
    "\n"
    "   \n"
    "{\"meta\": {\"text\": \"nested is not it\"}, \"text\": \"caf\\u00e9 \\\"quoted\\\"\"}\r\n"
    "{\"text\": \"   \"}\n"
    "{\"text\": \"last, no newline\"}";
const Documents kJsonlDocuments = {"first doc\nwith two lines", "caf\xc3\xa9 \"quoted\"", "last, no newline"};

TEST(CorpusFormats, JsonlLinesAreDocuments) {
  ScratchDirectory scratch;
  const std::string path = write(scratch.file("corpus.jsonl"), kJsonl);
  Corpus corpus = read_corpus(path, nullptr);
  EXPECT_EQ(corpus.documents, kJsonlDocuments);  // the whitespace-only one dropped
  EXPECT_EQ(corpus.files, Documents{path});
  EXPECT_EQ(read_corpus(write(scratch.file("c.ndjson"), kJsonl), nullptr).documents, kJsonlDocuments);
  // The same bytes under a .txt name are one plain-text document.
  EXPECT_EQ(read_corpus(write(scratch.file("c.txt"), kJsonl), nullptr).documents, Documents{kJsonl});
}

TEST(CorpusFormats, JsonlFieldIsConfigurable) {
  ScratchDirectory scratch;
  const std::string path =
      write(scratch.file("c.jsonl"), "{\"content\": \"a\", \"text\": \"no\"}\n{\"content\": \"b\"}\n");
  EXPECT_EQ(read_corpus(path, nullptr, "content").documents, (Documents{"a", "b"}));
  EXPECT_EQ(error_of(path), path +
                                ":2: expected a JSON object with a string \"text\" member (data.jsonl_field), got "
                                "no \"text\" member");
}

TEST(CorpusFormats, BadJsonlLinesAreOneErrorWithFileAndLine) {
  ScratchDirectory scratch;
  const std::string not_json = write(scratch.file("a.jsonl"), "{\"text\": \"ok\"}\n\n{\"text\": oops}\n");
  EXPECT_EQ(error_of(not_json).rfind(not_json + ":3: not valid JSON (", 0), 0u) << error_of(not_json);
  const std::string array = write(scratch.file("b.jsonl"), "[\"text\"]\n");
  EXPECT_EQ(error_of(array), array +
                                 ":1: expected a JSON object with a string \"text\" member (data.jsonl_field), "
                                 "got a JSON value that is not an object");
  const std::string number = write(scratch.file("c.jsonl"), "{\"text\": \"ok\"}\n{\"text\": 3}\n");
  EXPECT_EQ(error_of(number), number +
                                  ":2: expected a JSON object with a string \"text\" member "
                                  "(data.jsonl_field), got a \"text\" that is not a string");
  const std::string blank = write(scratch.file("d.jsonl"), "\n{\"text\": \" \"}\n");
  EXPECT_NE(error_of(blank).find("no documents"), std::string::npos) << error_of(blank);
}

TEST(CorpusFormats, CompressedTextAndJsonlDecodeToTheSameDocuments) {
  ScratchDirectory scratch;
  const std::string fortunes = "one\n%\ntwo \xe2\x9c\x93\n%\n";
  const Documents fortune_documents = read_corpus(write(scratch.file("f.txt"), fortunes), nullptr).documents;
  EXPECT_EQ(fortune_documents, (Documents{"one\n", "two \xe2\x9c\x93\n"}));
  EXPECT_EQ(read_corpus(write(scratch.file("f.txt.gz"), gzip_compress(fortunes)), nullptr).documents,
            fortune_documents);
  EXPECT_EQ(read_corpus(write(scratch.file("f.txt.zst"), zstd_compress(fortunes)), nullptr).documents,
            fortune_documents);
  EXPECT_EQ(read_corpus(write(scratch.file("f.gz"), gzip_compress(fortunes)), nullptr).documents, fortune_documents);
  EXPECT_EQ(read_corpus(write(scratch.file("c.jsonl.gz"), gzip_compress(kJsonl)), nullptr).documents, kJsonlDocuments);
  EXPECT_EQ(read_corpus(write(scratch.file("c.jsonl.zst"), zstd_compress(kJsonl)), nullptr).documents, kJsonlDocuments);
  // Decoded text gets the plain-text checks.
  const std::string binary = write(scratch.file("b.txt.gz"), gzip_compress(std::string("ab\0c", 4)));
  EXPECT_EQ(error_of(binary), binary + ": binary file (NUL byte at offset 2)");
  const std::string empty = write(scratch.file("e.txt.zst"), zstd_compress(""));
  EXPECT_EQ(error_of(empty), empty + ": file is empty");
  // A JSONL line error counts decoded lines.
  const std::string bad = write(scratch.file("bad.jsonl.zst"), zstd_compress("{\"text\": \"a\"}\n{}\n"));
  EXPECT_EQ(error_of(bad).rfind(bad + ":2: expected a JSON object", 0), 0u) << error_of(bad);
}

TEST(CorpusFormats, FoldersMixFormats) {
  ScratchDirectory scratch;
  write(scratch.file("a.txt"), "plain\n");
  write(scratch.file("b.jsonl.gz"), gzip_compress("{\"text\": \"from gzip jsonl\"}\n"));
  write(scratch.file("c.txt.zst"), zstd_compress("zstd 1\n%\nzstd 2\n"));
  write(scratch.file("d/e.jsonl"), "{\"text\": \"nested jsonl\"}\n");
  write(scratch.file("f.bin.gz"), gzip_compress(std::string("\0\1", 2)));  // binary once decoded: skipped
  Corpus corpus = read_corpus(scratch.path(), nullptr);
  EXPECT_EQ(corpus.documents, (Documents{"plain\n", "from gzip jsonl", "zstd 1\n", "zstd 2\n", "nested jsonl"}));
  EXPECT_EQ(corpus.skipped_files, Documents{scratch.file("f.bin.gz")});
}

TEST(CorpusFormats, CorruptOrTruncatedCompressedFilesAreOneErrorNamingTheFile) {
  ScratchDirectory scratch;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i * 7919 % 10007) + "\n";
  std::string gz = gzip_compress(text), zst = zstd_compress(text);
  const std::string truncated_gz = write(scratch.file("t.txt.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_EQ(error_of(truncated_gz), truncated_gz + ": truncated gzip file (it ends inside the compressed stream)");
  const std::string truncated_zst = write(scratch.file("t.jsonl.zst"), zst.substr(0, zst.size() / 2));
  EXPECT_EQ(error_of(truncated_zst), truncated_zst + ": truncated zstd file (it ends inside the compressed stream)");
  gz[gz.size() / 2] ^= 0x40;
  zst[zst.size() / 2] ^= 0x40;
  const std::string corrupt_gz = write(scratch.file("c.txt.gz"), gz);
  EXPECT_EQ(error_of(corrupt_gz).rfind(corrupt_gz + ": corrupt gzip data (", 0), 0u) << error_of(corrupt_gz);
  const std::string corrupt_zst = write(scratch.file("c.txt.zst"), zst);
  EXPECT_EQ(error_of(corrupt_zst).rfind(corrupt_zst + ": corrupt zstd data (", 0), 0u) << error_of(corrupt_zst);
  // In a folder too: damaged data is an error, never skipped like a binary file.
  ScratchDirectory folder;
  write(folder.file("good.txt"), "fine\n");
  const std::string inside = write(folder.file("sub/bad.txt.zst"), zst);
  EXPECT_EQ(error_of(folder.path()).rfind(inside + ": corrupt zstd data (", 0), 0u) << error_of(folder.path());
}

}  // namespace
}  // namespace lathe
