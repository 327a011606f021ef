// Simulated ranks for expert-parallel tests: N threads of one process exchange through a shared
// mailbox with MPI_Alltoallv semantics (autograd/expert_exchange.h's ExpertTransport).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <vector>

#include "lathe/autograd/expert_exchange.h"

namespace lathe::autograd {

// N ranks in one process: all_to_all_v posts each rank's send buffer, waits for every rank, copies
// its parts out of the others' buffers, and waits again before the buffers may change.
class Mailbox {
 public:
  explicit Mailbox(int world) : world_(world), sync_(world), posted_(world), counts_(world) {}
  int world() const { return world_; }
  template <class T>
  void exchange(int rank, const T* send, const std::vector<int64_t>& send_counts, T* recv,
                const std::vector<int64_t>& recv_counts) {
    posted_[rank] = send;
    counts_[rank] = send_counts;
    sync_.arrive_and_wait();
    int64_t at = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t offset = 0;  // where p's part for `rank` starts in p's send buffer
      for (int q = 0; q < rank; ++q) offset += counts_[p][q];
      EXPECT_EQ(counts_[p][rank], recv_counts[p]);
      const T* source = static_cast<const T*>(posted_[p]) + offset;
      std::copy(source, source + recv_counts[p], recv + at);
      at += recv_counts[p];
    }
    sync_.arrive_and_wait();
  }

 private:
  int world_;
  std::barrier<> sync_;
  std::vector<const void*> posted_;
  std::vector<std::vector<int64_t>> counts_;
};

class MailboxTransport final : public ExpertTransport {
 public:
  MailboxTransport(Mailbox& mailbox, int rank) : mailbox_(mailbox), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return mailbox_.world(); }
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                    const std::vector<int64_t>& recv_counts) override {
    mailbox_.exchange(rank_, send, send_counts, recv, recv_counts);
  }
  void all_to_all_v(const int64_t* send, const std::vector<int64_t>& send_counts, int64_t* recv,
                    const std::vector<int64_t>& recv_counts) override {
    mailbox_.exchange(rank_, send, send_counts, recv, recv_counts);
  }

 private:
  Mailbox& mailbox_;
  int rank_;
};

}  // namespace lathe::autograd
