#include "lathe/io/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {

DurableFileWriter::DurableFileWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LATHE_CHECK(fd_ >= 0, "cannot create ", path_, ": ", std::strerror(errno));
}

DurableFileWriter::~DurableFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

void DurableFileWriter::write(const void* data, size_t bytes) {
  LATHE_ASSERT(fd_ >= 0);
  crc_.update(data, bytes);
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    // Linux writes at most about 2 GB per call; smaller pieces also keep a kill responsive.
    size_t piece = std::min<size_t>(bytes, size_t{1} << 30);
    ssize_t written = ::write(fd_, p, piece);
    if (written < 0 && errno == EINTR) continue;
    LATHE_CHECK(written > 0, "cannot write ", path_, ": ", written < 0 ? std::strerror(errno) : "no progress");
    p += written;
    bytes -= static_cast<size_t>(written);
    bytes_written_ += written;
  }
}

FileDigest DurableFileWriter::finish() {
  LATHE_ASSERT(fd_ >= 0);
  LATHE_CHECK(::fsync(fd_) == 0, "cannot fsync ", path_, ": ", std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int error = errno;
    ::unlink(path_.c_str());
    throw_error("cannot close ", path_, ": ", std::strerror(error));
  }
  return FileDigest{bytes_written_, crc_.value()};
}

FileDigest write_file_synced(const std::string& path, const std::string& contents) {
  DurableFileWriter writer(path);
  writer.write(contents.data(), contents.size());
  return writer.finish();
}

FileDigest write_file_atomically(const std::string& path, const std::string& contents) {
  std::string temporary = str_cat(path, ".tmp.", ::getpid());
  FileDigest digest = write_file_synced(temporary, contents);
  commit_temporary_file(temporary, path);
  return digest;
}

void rename_durably(const std::string& from, const std::string& to) {
  LATHE_CHECK(::rename(from.c_str(), to.c_str()) == 0, "cannot rename ", from, " to ", to, ": ", std::strerror(errno));
  std::string to_parent = parent_directory(to);
  sync_directory(to_parent);
  std::string from_parent = parent_directory(from);
  if (from_parent != to_parent) sync_directory(from_parent);
}

void sync_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  LATHE_CHECK(fd >= 0, "cannot open directory ", path, ": ", std::strerror(errno));
  int result = ::fsync(fd);
  int error = errno;
  ::close(fd);
  LATHE_CHECK(result == 0, "cannot fsync directory ", path, ": ", std::strerror(error));
}

int64_t read_file_chunks(const std::string& path, size_t chunk_bytes,
                         const std::function<void(const char* data, size_t bytes)>& consume) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LATHE_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  std::vector<char> buffer(chunk_bytes);
  int64_t total = 0;
  for (;;) {
    ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      throw_error("cannot read ", path, ": ", std::strerror(error));
    }
    if (got == 0) break;
    consume(buffer.data(), static_cast<size_t>(got));
    total += got;
  }
  ::close(fd);
  return total;
}

std::string read_file_contents(const std::string& path) {
  std::string contents;
  read_file_chunks(path, size_t{1} << 16, [&](const char* data, size_t bytes) { contents.append(data, bytes); });
  return contents;
}

Json read_json_file(const std::string& path) {
  const std::string text = read_file_contents(path);
  try {
    return Json::parse(text);
  } catch (const Error& error) {
    throw error.with_context(path);
  }
}

void commit_temporary_file(const std::string& temporary, const std::string& path) {
  try {
    rename_durably(temporary, path);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
}

std::string parent_directory(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace lathe
