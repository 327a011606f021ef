// Reading files that may be compressed, as a stream of decoded bytes: gzip (zlib, Debian's
// zlib1g-dev) and Zstandard (libzstd-dev), recognised by their first bytes (1f 8b; 28 b5 2f fd);
// anything else is read as it is. Only a 64 KiB piece of the compressed input is held at a time.
// Concatenated gzip members and zstd frames (`cat a.gz b.gz`) decode as one stream.
//
// Errors (lathe::Error naming the path): a file that cannot be opened; a name ending in .gz or
// .zst whose bytes are not that format; corrupt data (with the library's reason); input that ends
// inside the compressed stream ("truncated").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace lathe {

enum class Compression { none, gzip, zstd };
const char* to_string(Compression compression);

// By the file name's last extension: .gz -> gzip, .zst / .zstd -> zstd, else none.
Compression compression_from_name(const std::string& path);
// The name without a trailing .gz / .zst / .zstd ("corpus.jsonl.gz" -> "corpus.jsonl").
std::string name_without_compression(const std::string& path);

class CompressedFileReader {
 public:
  explicit CompressedFileReader(const std::string& path);  // opens and reads the magic bytes
  ~CompressedFileReader();
  CompressedFileReader(const CompressedFileReader&) = delete;
  CompressedFileReader& operator=(const CompressedFileReader&) = delete;

  Compression compression() const;
  // Up to `capacity` decoded bytes into `buffer`; 0 only at the end of the (complete) stream.
  size_t read(char* buffer, size_t capacity);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The whole decoded content of a file.
std::string read_decoded_file(const std::string& path);

// Calls `line` with each decoded line, without its "\n" (or "\r\n"), numbered from 1; a last line
// without a newline counts. Only the current line is held in memory.
void for_each_decoded_line(const std::string& path,
                           const std::function<void(std::string_view line, int64_t number)>& line);

}  // namespace lathe
