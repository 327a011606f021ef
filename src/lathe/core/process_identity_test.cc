// process_identity and the /proc reads under it: a live process has one, a reaped or zombie one
// none, and a process that exits between the open of its stat file and the read (the race an
// elastic supervisor's scan of /proc runs into) reads as gone instead of throwing.
#include "lathe/core/process_identity.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace lathe {
namespace {

// A child that sleeps until killed.
pid_t sleeping_child() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

TEST(ProcessIdentity, LiveProcessHasOneAndItsPidLeads) {
  const std::string identity = process_identity(::getpid());
  ASSERT_FALSE(identity.empty());
  EXPECT_EQ(identity.substr(0, identity.find(' ')), std::to_string(::getpid()));
  EXPECT_TRUE(process_identity_alive(identity));
}

TEST(ProcessIdentity, ZombieAndReapedProcessesHaveNone) {
  const pid_t child = sleeping_child();
  ASSERT_GT(child, 0);
  const std::string identity = process_identity(child);
  ASSERT_FALSE(identity.empty());
  ::kill(child, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  EXPECT_EQ(process_identity(child), "");
  EXPECT_FALSE(process_identity_alive(identity));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped
  EXPECT_EQ(process_identity(child), "");
  EXPECT_EQ(process_stat_text(child), "");
  EXPECT_FALSE(process_identity_alive(identity));
}

TEST(ProcessIdentity, ProcessGoneBetweenOpenAndReadReadsAsGone) {
  const pid_t child = sleeping_child();
  ASSERT_GT(child, 0);
  const std::string path = "/proc/" + std::to_string(child) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ::kill(child, SIGKILL);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  std::string text = "unchanged";
  EXPECT_NO_THROW(text = read_proc_file(fd));
  EXPECT_EQ(text, "");
  // The hazard itself: the kernel refuses the read (ESRCH), which std::ifstream's underflow throws.
  const int again = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_LT(again, 0);
  char byte = 0;
  ::lseek(fd, 0, SEEK_SET);
  errno = 0;
  EXPECT_LT(::read(fd, &byte, 1), 0);
  EXPECT_EQ(errno, ESRCH);
  ::close(fd);
}

}  // namespace
}  // namespace lathe
