#include "lathe/io/run_directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lathe/core/error.h"

namespace lathe {

namespace {

std::string read_holder(int fd) {
  char text[256] = {};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder = got > 0 ? std::string(text, static_cast<size_t>(got)) : "";
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder;
}

long holder_pid(const std::string& holder) { return std::atol(holder.c_str()); }

}  // namespace

RunDirectoryLock RunDirectoryLock::acquire(const std::string& run_dir, const std::string& holder,
                                           bool inherited_by_children) {
  const std::string path = run_dir + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | (inherited_by_children ? 0 : O_CLOEXEC), 0644);
  LATHE_CHECK(fd >= 0, "cannot open the run directory lock ", path, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string current = read_holder(fd);
    ::close(fd);
    LATHE_CHECK(error == EWOULDBLOCK, "cannot lock ", path, ": ", std::strerror(error));
    const char* delegated = std::getenv("LATHE_RUN_DIR_LOCK_HOLDER");
    if (delegated && holder_pid(current) > 0 && holder_pid(current) == std::atol(delegated)) return {};
    const size_t space = current.find(' ');
    throw_error("run_dir '", run_dir, "' is in use by another process (pid ",
                current.empty() ? std::string("unknown") : current.substr(0, space),
                space == std::string::npos ? "" : ": " + current.substr(space + 1),
                "); wait for it to end or use another run_dir");
  }
  const std::string text = str_cat(::getpid(), " ", holder, "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int error = errno;
    ::close(fd);
    throw_error("cannot write the run directory lock ", path, ": ", std::strerror(error));
  }
  RunDirectoryLock lock;
  lock.fd_ = fd;
  return lock;
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock (children that inherited it keep it)
}

RunDirectoryLock::RunDirectoryLock(RunDirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunDirectoryLock& RunDirectoryLock::operator=(RunDirectoryLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

}  // namespace lathe
