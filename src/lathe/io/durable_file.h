// Writing files so that a crash (process kill or power loss) never leaves a half-written file
// under its final name: data goes to a temporary name, is fsynced, renamed over the target, and
// the directory is fsynced so the rename itself survives. Every failure throws lathe::Error
// naming the path and the system's reason.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "lathe/core/json.h"
#include "lathe/io/checksum.h"

namespace lathe {

// Size and CRC-32C of a file as written, so a caller (checkpoints) can record them without
// reading the file back.
struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Streams bytes into a new file (created or truncated) while computing their CRC-32C. finish()
// fsyncs and closes; destroying an unfinished writer closes and deletes the file.
class DurableFileWriter {
 public:
  explicit DurableFileWriter(std::string path);
  ~DurableFileWriter();
  DurableFileWriter(const DurableFileWriter&) = delete;
  DurableFileWriter& operator=(const DurableFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  FileDigest finish();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t bytes_written_ = 0;
  Crc32c crc_;
};

// Writes `contents` to `path` and fsyncs it (no rename: for files inside a directory that is
// itself published atomically, like a checkpoint being written).
FileDigest write_file_synced(const std::string& path, const std::string& contents);
// Writes `contents` to "<path>.tmp.<pid>", fsyncs, renames over `path`, fsyncs the directory.
FileDigest write_file_atomically(const std::string& path, const std::string& contents);
// Renames `from` to `to` and fsyncs the directory holding `to` (and `from`'s, when different).
void rename_durably(const std::string& from, const std::string& to);
// fsyncs a directory so entries created, renamed or removed in it are on disk.
void sync_directory(const std::string& path);
// The whole file as a string; throws lathe::Error naming the file when it cannot be read.
std::string read_file_contents(const std::string& path);
// The file parsed as JSON; a read or parse error is a lathe::Error prefixed with the path.
Json read_json_file(const std::string& path);
// Reads a file in chunks of up to chunk_bytes, calling consume(data, bytes) for each; throws
// lathe::Error naming the file when it cannot be read. Returns the number of bytes read.
int64_t read_file_chunks(const std::string& path, size_t chunk_bytes,
                         const std::function<void(const char* data, size_t bytes)>& consume);
// Renames a fully written temporary file onto its final path (rename_durably); on failure removes
// the temporary and rethrows.
void commit_temporary_file(const std::string& temporary, const std::string& path);
// The directory part of a path ("." when there is none).
std::string parent_directory(const std::string& path);

}  // namespace lathe
