#include "lathe/models/hf/hf_model_location.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "lathe/core/error.h"
#include "lathe/io/durable_file.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// "org/name": one slash, no path-like parts; what the Hub accepts as a repository id.
bool looks_like_repository_id(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string::npos) return false;
  if (name[0] == '.' || name.find("..") != std::string::npos) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  return true;
}

}  // namespace

std::string hf_hub_cache_directory() {
  if (std::string hub = environment("HF_HUB_CACHE"); !hub.empty()) return hub;
  if (std::string home = environment("HF_HOME"); !home.empty()) return (fs::path(home) / "hub").string();
  if (std::string xdg = environment("XDG_CACHE_HOME"); !xdg.empty())
    return (fs::path(xdg) / "huggingface" / "hub").string();
  return (fs::path(environment("HOME")) / ".cache" / "huggingface" / "hub").string();
}

std::string resolve_hf_model_directory(const std::string& name_or_directory) {
  std::error_code error;
  if (fs::is_directory(name_or_directory, error)) return name_or_directory;
  const size_t at = name_or_directory.find('@');
  const std::string repository = name_or_directory.substr(0, at);
  const std::string revision = at == std::string::npos ? "main" : name_or_directory.substr(at + 1);
  LATHE_CHECK(looks_like_repository_id(repository) && !revision.empty(), "'", name_or_directory,
              "' is neither a directory nor a Hugging Face model name (org/name or org/name@revision)");
  const std::string cache = hf_hub_cache_directory();
  std::string folder_name = "models--" + repository;
  folder_name.replace(folder_name.find('/'), 1, "--");
  const fs::path model_folder = fs::path(cache) / folder_name;
  LATHE_CHECK(fs::is_directory(model_folder, error), "'", repository, "' is not in the local Hugging Face cache (",
              model_folder.string(),
              " does not exist; the cache comes from HF_HUB_CACHE, HF_HOME or ~/.cache). "
              "lathe does not download: run `hf download ",
              repository, "` first, or give a directory");
  std::string commit = revision;
  const fs::path reference = model_folder / "refs" / revision;
  if (fs::is_regular_file(reference, error)) commit = trimmed(read_file_contents(reference.string()));
  const fs::path snapshot = model_folder / "snapshots" / commit;
  LATHE_CHECK(fs::is_directory(snapshot, error), "'", name_or_directory, "': the Hugging Face cache has no snapshot '",
              commit, "' (looked for ", snapshot.string(),
              "; revisions there: a branch or tag under refs/, or a "
              "commit under snapshots/)");
  LATHE_CHECK(fs::is_regular_file(snapshot / "config.json", error), "'", name_or_directory, "': the cached snapshot ",
              snapshot.string(), " has no config.json (a partial download? fetch the whole model again)");
  return snapshot.string();
}

}  // namespace lathe
