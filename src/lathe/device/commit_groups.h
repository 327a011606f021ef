// Asynchronous work in commit groups, as the GPU's cp.async and wgmma track it (their host
// emulations: cp_async_emulation.cc, wgmma_emulation.cc): issued work joins the open group,
// commit() closes it, and a wait completes the oldest groups first until at most `pending` remain.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

namespace lathe::simt {

template <class Work>
struct CommitGroups {
  std::vector<Work> open;                   // issued since the last commit
  std::deque<std::vector<Work>> committed;  // oldest first

  void commit() {
    committed.push_back(std::move(open));
    open.clear();
  }
  size_t in_flight() const {
    size_t count = open.size();
    for (const auto& group : committed) count += group.size();
    return count;
  }
  // complete(group) for the oldest committed groups, each removed first, until at most `pending`
  // remain.
  template <class Complete>
  void wait(int pending, Complete&& complete) {
    while (static_cast<int>(committed.size()) > pending) {
      const std::vector<Work> group = std::move(committed.front());
      committed.pop_front();
      complete(group);
    }
  }
};

}  // namespace lathe::simt
