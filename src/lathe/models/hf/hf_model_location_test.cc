// hf:org/name resolves through a Hugging Face cache laid out as huggingface_hub writes it
// (models--ORG--NAME/refs/main holding a commit, snapshots/COMMIT/ holding the files), found by
// the same environment variables, without network; a directory stays itself.
#include "lathe/models/hf/hf_model_location.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "expect_error.h"
#include "lathe/io/durable_file.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

// Sets an environment variable for one scope, restoring the previous value.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(HfModelLocation, TheCacheFolderFollowsHuggingFaceHubsVariables) {
  ScopedEnvironment hub("HF_HUB_CACHE", ""), home("HF_HOME", ""), xdg("XDG_CACHE_HOME", ""), user("HOME", "/u");
  unsetenv("HF_HUB_CACHE");
  unsetenv("HF_HOME");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(hf_hub_cache_directory(), "/u/.cache/huggingface/hub");
  setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(hf_hub_cache_directory(), "/x/huggingface/hub");
  setenv("HF_HOME", "/h", 1);
  EXPECT_EQ(hf_hub_cache_directory(), "/h/hub");
  setenv("HF_HUB_CACHE", "/c", 1);
  EXPECT_EQ(hf_hub_cache_directory(), "/c");
}

TEST(HfModelLocation, NamesResolveToCachedSnapshots) {
  ScratchDirectory scratch;
  ScopedEnvironment hub("HF_HUB_CACHE", ""), home("HF_HOME", scratch.path());
  unsetenv("HF_HUB_CACHE");
  const std::string model = scratch.file("hub/models--my-org--tiny.model");
  for (const char* folder : {"/refs", "/snapshots/0123abcd", "/snapshots/4567ef00", "/snapshots/89aa"})
    std::filesystem::create_directories(model + folder);
  write_file_atomically(model + "/refs/main", "0123abcd\n");
  write_file_atomically(model + "/refs/v2", "4567ef00");
  write_file_atomically(model + "/snapshots/0123abcd/config.json", "{}");
  write_file_atomically(model + "/snapshots/4567ef00/config.json", "{}");
  write_file_atomically(model + "/snapshots/89aa/tokenizer.json", "{}");

  EXPECT_EQ(resolve_hf_model_directory("my-org/tiny.model"), model + "/snapshots/0123abcd");
  EXPECT_EQ(resolve_hf_model_directory("my-org/tiny.model@v2"), model + "/snapshots/4567ef00");
  EXPECT_EQ(resolve_hf_model_directory("my-org/tiny.model@0123abcd"), model + "/snapshots/0123abcd");
  EXPECT_EQ(resolve_hf_model_directory(scratch.path()), scratch.path());  // a directory is itself

  expect_error([&] { resolve_hf_model_directory("my-org/other"); },
               "'my-org/other' is not in the local Hugging Face cache (" + scratch.file("hub/models--my-org--other"));
  expect_error([&] { resolve_hf_model_directory("my-org/tiny.model@v3"); }, "has no snapshot 'v3'");
  expect_error([&] { resolve_hf_model_directory("my-org/tiny.model@89aa"); }, "has no config.json");
  expect_error([&] { resolve_hf_model_directory("no/such/dir"); },
               "'no/such/dir' is neither a directory nor a Hugging Face model name");
  expect_error([&] { resolve_hf_model_directory("../up"); }, "is neither a directory nor");
}

}  // namespace
}  // namespace lathe
