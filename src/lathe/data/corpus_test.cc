// Corpus reading: document splitting, folder traversal (sorted, symlinks once, binary and
// non-UTF-8 files skipped with one note) and the errors for unusable input.
#include "lathe/data/corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lathe/core/error.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::string>;

Documents split(const std::string& text) {
  Documents documents;
  split_documents(text, documents);
  return documents;
}

TEST(Corpus, SplitsAtPercentLines) {
  EXPECT_EQ(split("a\n%\nb\nc\n%\n"), (Documents{"a\n", "b\nc\n"}));
  EXPECT_EQ(split("%\nonly\n%\n%\n  \n%\nlast"), (Documents{"only\n", "last"}));
  EXPECT_EQ(split("one\r\n%\r\ntwo\r\n"), (Documents{"one\r\n", "two\r\n"}));
  EXPECT_EQ(split("50%\ngrowth\n% \n"), (Documents{"50%\ngrowth\n% \n"}));  // no line is exactly "%"
  EXPECT_EQ(split("whole file\n"), (Documents{"whole file\n"}));
  EXPECT_TRUE(split(" \n\t\n").empty());
}

class CorpusFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("lathe_corpus_test_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string write(const std::string& name, const std::string& bytes) {
    fs::path path = root_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }
  std::string error_of(const std::string& path) {
    try {
      read_corpus(path, nullptr);
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  }
  fs::path root_;
};

TEST_F(CorpusFiles, SingleFileErrorsNameTheReason) {
  std::string empty = write("empty.txt", "");
  EXPECT_EQ(error_of(empty), empty + ": file is empty");
  std::string binary = write("data.bin", std::string("ab\0cd", 5));
  EXPECT_EQ(error_of(binary), binary + ": binary file (NUL byte at offset 2)");
  std::string latin1 = write("latin1.txt", "caf\xe9 au lait");
  EXPECT_EQ(error_of(latin1), latin1 + ": not valid UTF-8 (byte offset 3)");
  std::string overlong = write("overlong.txt", "ok \xc0\xaf");
  EXPECT_EQ(error_of(overlong), overlong + ": not valid UTF-8 (byte offset 3)");
  std::string blank = write("blank.txt", "\n%\n \n");
  EXPECT_NE(error_of(blank).find("no documents"), std::string::npos) << error_of(blank);
  EXPECT_NE(error_of((root_ / "missing").string()).find("no such file"), std::string::npos);
}

TEST_F(CorpusFiles, SingleFile) {
  std::string path = write("fortunes", "first\n%\nsecond \xe2\x9c\x93\n%\n");
  Corpus corpus = read_corpus(path, nullptr);
  EXPECT_EQ(corpus.documents, (Documents{"first\n", "second \xe2\x9c\x93\n"}));
  EXPECT_EQ(corpus.bytes, 6 + 11);
}

TEST_F(CorpusFiles, FolderIsSortedSkipsBadFilesAndReadsLinksOnce) {
  write("b.txt", "bee\n%\nbee two\n");
  write("a.txt", "ay");
  write("sub/c.txt", "sea");
  write("a.dat", std::string("\0\1\2", 3));
  write("z.txt", "z\xff");
  fs::create_symlink(root_ / "a.txt", root_ / "a.u8");  // the same file again
  fs::create_symlink(root_, root_ / "sub" / "loop");    // a folder loop
  fs::create_symlink(root_ / "nowhere", root_ / "dangling");
  std::FILE* log = std::tmpfile();
  Corpus corpus = read_corpus(root_.string(), log);
  EXPECT_EQ(corpus.documents, (Documents{"ay", "bee\n", "bee two\n", "sea"}));
  EXPECT_EQ(corpus.skipped_files, (Documents{(root_ / "a.dat").string(), (root_ / "z.txt").string()}));
  std::rewind(log);
  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof line, log), nullptr);
  EXPECT_STREQ(line, "data: skipped 2 binary/non-UTF-8 files (e.g. a.dat)\n");
  EXPECT_EQ(std::fgets(line, sizeof line, log), nullptr);  // exactly one note
  std::fclose(log);
}

TEST_F(CorpusFiles, FolderWithoutTextIsAnError) {
  write("one.dat", std::string("\0", 1));
  write("two.dat", "\xfe\xff");
  std::string message = error_of(root_.string());
  EXPECT_NE(message.find(root_.string() + ": folder has no usable text files"), std::string::npos) << message;
  fs::remove_all(root_);
  fs::create_directories(root_);
  write("blank.txt", "  \n");
  EXPECT_NE(error_of(root_.string()).find("no documents"), std::string::npos);
}

}  // namespace
}  // namespace lathe
