#include "lathe/device/cp_async_emulation.h"

#include <array>
#include <cstring>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/device/commit_groups.h"
#include "lathe/device/simt_emulation.h"

namespace lathe::cp_async_emulation {
namespace {

struct Copy {
  unsigned char* destination;
  std::array<unsigned char, 16> data;  // the source's bytes when issued, zero-filled
};

// One thread's copies in flight (per block: simt::block_state, keyed by the thread).
struct ThreadCopies : simt::BlockState {
  simt::CommitGroups<Copy> copies;
  int thread = 0;

  void finish() override {
    if (copies.in_flight() > 0)
      throw_error("cp.async (emulated): thread ", thread, " ended its block with ", copies.in_flight(),
                  " copies never waited for (cp.async.wait_group)");
  }
};

ThreadCopies& copies_of_running_thread() {
  const int thread = static_cast<int>(simt::current().thread_idx.x);
  ThreadCopies& copies = simt::block_state<ThreadCopies>(thread);
  copies.thread = thread;
  return copies;
}

}  // namespace

void copy_16(void* shared_destination, const void* global_source, int bytes) {
  LATHE_CHECK(bytes == 0 || bytes == 16, "cp.async (emulated): a copy of ", bytes, " bytes (0 or 16)");
  simt::note_shared_write(shared_destination, 16);  // it may land at once
  Copy copy{static_cast<unsigned char*>(shared_destination), {}};
  std::memcpy(copy.data.data(), global_source, static_cast<size_t>(bytes));
  copies_of_running_thread().copies.open.push_back(copy);
}

void commit() { copies_of_running_thread().copies.commit(); }

void wait(int pending) {
  copies_of_running_thread().copies.wait(pending, [](const std::vector<Copy>& group) {
    for (const Copy& copy : group) {
      simt::note_shared_write(copy.destination, copy.data.size());
      std::memcpy(copy.destination, copy.data.data(), copy.data.size());
    }
  });
}

void fence_proxy_async() { simt::note_proxy_fence(); }

}  // namespace lathe::cp_async_emulation
