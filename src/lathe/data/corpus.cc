#include "lathe/data/corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "lathe/core/error.h"
#include "lathe/core/json.h"
#include "lathe/io/compressed_file.h"
#include "lathe/io/utf8.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// Why a file's bytes are not text ("" when they are).
std::string text_problem(const std::string& text) {
  if (size_t nul = text.find('\0'); nul != std::string::npos)
    return str_cat("binary file (NUL byte at offset ", nul, ")");
  if (size_t bad = find_invalid_utf8(text); bad != std::string::npos)
    return str_cat("not valid UTF-8 (byte offset ", bad, ")");
  return "";
}

bool only_whitespace(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; });
}

struct FileIdentity {
  dev_t device;
  ino_t inode;
  bool operator<(const FileIdentity& other) const {
    return device != other.device ? device < other.device : inode < other.inode;
  }
};

// Collects regular files under a folder in sorted order, following symlinks, each file and
// folder once (which also stops symlink loops).
void collect_files(const fs::path& folder, std::set<FileIdentity>& seen, std::vector<std::string>& files) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    entries.push_back(it->path());
  LATHE_CHECK(!error, folder.string(), ": cannot list folder (", error.message(), ")");
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    struct stat info;
    if (::stat(entry.c_str(), &info) != 0) continue;  // a dangling symlink
    if (!seen.insert({info.st_dev, info.st_ino}).second) continue;
    if (S_ISDIR(info.st_mode))
      collect_files(entry, seen, files);
    else if (S_ISREG(info.st_mode))
      files.push_back(entry.string());
  }
}

// The jsonl_field string of each JSON object line; the line number in every error.
void read_jsonl_documents(const std::string& path, const std::string& field, std::vector<std::string>& documents) {
  for_each_decoded_line(path, [&](std::string_view line, int64_t number) {
    if (only_whitespace(line)) return;
    Json record;
    try {
      record = Json::parse(std::string(line));
    } catch (const Error& error) {
      throw_error(path, ":", number, ": not valid JSON (", error.what(), ")");
    }
    const Json* text = record.is_object() ? record.find(field) : nullptr;
    LATHE_CHECK(text && text->is_string(), path, ":", number, ": expected a JSON object with a string \"", field,
                "\" member (data.jsonl_field), got ",
                !record.is_object() ? "a JSON value that is not an object"
                : text              ? "a \"" + field + "\" that is not a string"
                                    : "no \"" + field + "\" member");
    if (!only_whitespace(text->as_string())) documents.push_back(text->as_string());
  });
}

}  // namespace

bool is_jsonl_name(const std::string& path) {
  const std::string name = name_without_compression(path);
  return name.ends_with(".jsonl") || name.ends_with(".ndjson");
}

void split_documents(const std::string& text, std::vector<std::string>& documents) {
  std::vector<std::string> pieces;
  size_t start = 0, line = 0;
  bool separated = false;
  while (line < text.size()) {
    size_t end = text.find('\n', line);
    size_t next = end == std::string::npos ? text.size() : end + 1;
    std::string_view content(text.data() + line, (end == std::string::npos ? text.size() : end) - line);
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    if (content == "%") {
      pieces.push_back(text.substr(start, line - start));
      start = next;
      separated = true;
    }
    line = next;
  }
  if (!separated) {
    if (!only_whitespace(text)) documents.push_back(text);
    return;
  }
  pieces.push_back(text.substr(start));
  for (auto& piece : pieces)
    if (!only_whitespace(piece)) documents.push_back(std::move(piece));
}

Corpus read_corpus(const std::string& path, std::FILE* log, const std::string& jsonl_field) {
  Corpus corpus;
  struct stat info;
  LATHE_CHECK(::stat(path.c_str(), &info) == 0, path, ": no such file or folder");
  // A FIFO blocks forever and a device such as /dev/zero never ends: regular files and folders only.
  LATHE_CHECK(S_ISDIR(info.st_mode) || S_ISREG(info.st_mode), path,
              ": not a regular file or a folder (a FIFO, device or socket cannot be a corpus)");
  if (!S_ISDIR(info.st_mode) && is_jsonl_name(path)) {
    read_jsonl_documents(path, jsonl_field, corpus.documents);
    corpus.files.push_back(path);
  } else if (!S_ISDIR(info.st_mode)) {
    std::string text = read_decoded_file(path);
    LATHE_CHECK(!text.empty(), path, ": file is empty");
    std::string problem = text_problem(text);
    LATHE_CHECK(problem.empty(), path, ": ", problem);
    split_documents(text, corpus.documents);
    corpus.files.push_back(path);
  } else {
    std::set<FileIdentity> seen{{info.st_dev, info.st_ino}};
    std::vector<std::string> files;
    collect_files(path, seen, files);
    for (const std::string& file : files) {
      if (is_jsonl_name(file)) {
        read_jsonl_documents(file, jsonl_field, corpus.documents);
        corpus.files.push_back(file);
        continue;
      }
      std::string text = read_decoded_file(file);
      if (!text_problem(text).empty()) {
        corpus.skipped_files.push_back(file);
        continue;
      }
      split_documents(text, corpus.documents);
      corpus.files.push_back(file);
    }
    if (!corpus.skipped_files.empty() && log) {
      std::fprintf(log, "data: skipped %zu binary/non-UTF-8 file%s (e.g. %s)\n", corpus.skipped_files.size(),
                   corpus.skipped_files.size() == 1 ? "" : "s",
                   fs::path(corpus.skipped_files.front()).filename().c_str());
    }
    LATHE_CHECK(!corpus.files.empty(), path, ": folder has no usable text files (", files.size(), " files, ",
                corpus.skipped_files.size(), " binary or not UTF-8)");
  }
  LATHE_CHECK(!corpus.documents.empty(), path, ": corpus has no documents (only whitespace or '%' separators)");
  for (const auto& document : corpus.documents) corpus.bytes += static_cast<int64_t>(document.size());
  return corpus;
}

}  // namespace lathe
