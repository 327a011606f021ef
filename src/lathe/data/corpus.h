// Reading a text corpus: one file, or every file under a folder (recursively, in sorted path
// order, so the result is the same on every machine). Formats, by file name:
//   - *.jsonl (and *.ndjson): one JSON object per line, its string member `jsonl_field` ("text" by
//     default; other members ignored) one document; blank lines skipped. A line that is not such an
//     object is an error "FILE:LINE: ...". Read line by line.
//   - anything else is plain text: a file whose text has lines holding only "%" (the fortune
//     format, /usr/share/games/fortunes) is split into documents at those lines; otherwise the
//     whole file is one document.
// Either may be compressed, gzip or zstd (io/compressed_file.h: recognised by the first bytes;
// "corpus.jsonl.gz" is JSONL read through gzip), and is decoded as a stream. A folder may mix all of
// these. Documents that are empty or only whitespace are dropped.
//
// In a folder, a file reached twice (through symlinks) is read once, and text files that are binary
// (contain a NUL byte) or not valid UTF-8 once decoded are skipped, summarised in one note on the log
// ("data: skipped 61 binary/non-UTF-8 files (e.g. art.dat)"). Errors (lathe::Error, naming the path
// and the reason): a missing path; a single text file that is empty, binary or not UTF-8 (with the
// byte offset); a bad JSONL line; a corrupt or truncated compressed file (also in a folder); a
// folder without usable text; a corpus without any document.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lathe {

struct Corpus {
  std::vector<std::string> documents;
  std::vector<std::string> files;          // files read, in order
  std::vector<std::string> skipped_files;  // binary or not UTF-8 (folders only)
  int64_t bytes = 0;                       // total size of the documents
};

// Notes go to `log` (nullptr: silent). `jsonl_field`: data.jsonl_field.
Corpus read_corpus(const std::string& path, std::FILE* log = stderr, const std::string& jsonl_field = "text");

// True for a name that reads as JSONL: *.jsonl or *.ndjson, compressed or not.
bool is_jsonl_name(const std::string& path);

// Appends the documents of one file's text (the "%" separator rule above).
void split_documents(const std::string& text, std::vector<std::string>& documents);

}  // namespace lathe
