#include "lathe/device/simt_emulation.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace lathe::simt {
namespace {

// A thread's stack: the kernels' fragment arrays are a few KB; unoptimised builds and libm's
// frames take more.
constexpr size_t kStackBytes = size_t{256} << 10;

// Execution contexts, a fiber's or the scheduler's, and the switch between them. On x86-64 a switch
// pushes the callee-saved registers and the SSE and x87 control words on the stack it leaves,
// stores that stack pointer and takes the other context's; glibc's swapcontext, the portable form
// kept for other targets, also calls sigprocmask every time. A switch with a shuffle's bookkeeping
// took 410 ns through swapcontext and takes 30 ns here (Zen 3, 2026-12-07); swapcontext was ~70%
// of the attention emulation's time (perf).
#if defined(__x86_64__)
extern "C" void lathe_simt_switch(void** save_stack_pointer, void* load_stack_pointer);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl lathe_simt_switch
  .hidden lathe_simt_switch
  .type lathe_simt_switch, @function
lathe_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  fnstcw (%rsp)
  stmxcsr 8(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size lathe_simt_switch, .-lathe_simt_switch
  .popsection
)");

struct Context {
  void* stack_pointer = nullptr;
};
void switch_context(Context& from, const Context& to) { lathe_simt_switch(&from.stack_pointer, to.stack_pointer); }

// A context that enters `entry` (which must never return) on the stack [stack, stack + bytes): the
// frame lathe_simt_switch pops (control words, six registers, zero, `entry` as the return address)
// and a zero return address above it, so `entry` starts as if called, 16-byte aligned.
void start_context(Context& context, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);
  uint16_t x87_control;
  uint32_t sse_control;
  asm volatile("fnstcw %0" : "=m"(x87_control));
  asm volatile("stmxcsr %0" : "=m"(sse_control));
  std::memset(frame, 0, 80);
  std::memcpy(&frame[0], &x87_control, sizeof(x87_control));
  std::memcpy(&frame[1], &sse_control, sizeof(sse_control));
  frame[8] = reinterpret_cast<uint64_t>(entry);  // after r15, r14, r13, r12, rbx, rbp (all zero)
  context.stack_pointer = frame;
}
#else
struct Context {
  ucontext_t context;
};
void switch_context(Context& from, const Context& to) { swapcontext(&from.context, &to.context); }
// (Out of line: getcontext returns like setjmp, and the caller's loop counters would be at risk in
// the same frame.)
[[gnu::noinline]] void start_context(Context& context, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}
#endif

enum class State { ready, at_barrier, at_named_barrier, at_collective, done };

struct Fiber {
  Context context;
  std::unique_ptr<char[]> stack;
  ThreadCoordinates coordinates;
  State state = State::ready;
  int collective_warps = 0;                                         // at_collective: the size of the group it waits in
  int named_barrier = 0;                                            // at_named_barrier: which
  unsigned char in[kMaxCollectiveBytes], out[kMaxCollectiveBytes];  // a collective's operands
};

struct NamedBarrier {
  int arrived = 0, expected = 0;
};

// The last accesses of one 16-byte granule of shared memory, for note_shared_write / read.
constexpr size_t kGranuleBytes = 16;
constexpr int kNobody = -1, kSeveral = -2;
struct Granule {
  uint64_t write_epoch = ~uint64_t{0}, read_epoch = ~uint64_t{0};
  uint64_t writer_fences = 0;  // the writer's proxy fences before its write
  int writer = kNobody, reader = kNobody;
};

// Shared memory starts each block as these bytes (NaN as floats and as bf16: a kernel that reads
// what it never wrote gets NaN, as it would get whatever a GPU left there), between guard zones.
constexpr unsigned char kUnwrittenByte = 0xff;
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xa5;

// The block being run on this host thread.
struct Block {
  std::vector<Fiber> fibers;
  std::map<std::pair<int, int>, int> collective_arrivals;  // (first warp, warps) -> lanes arrived
  NamedBarrier named[kNamedBarriers];
  std::map<std::pair<std::type_index, int>, std::unique_ptr<BlockState>> states;
  uint64_t epoch = 0;  // __syncthreads completed in this block
  std::vector<Granule> granules;
  std::vector<uint64_t> proxy_fences;  // per thread
  Context scheduler;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer's fiber switches
  size_t scheduler_stack_bytes = 0;
  int running = -1;
  const std::function<void(unsigned char*)>* body = nullptr;
  unsigned char* shared = nullptr;
  size_t shared_bytes = 0;
  std::exception_ptr error;
};

thread_local Block* active = nullptr;

Fiber& running_fiber() {
  LATHE_CHECK(active != nullptr && active->running >= 0, "simt: a device function called outside simt::launch");
  return active->fibers[static_cast<size_t>(active->running)];
}

// AddressSanitizer follows stack switches only when told (without it, an exception thrown on a
// fiber's stack warns of false positives): before each switch the stack switched to, after it the
// stack switched from.
#if defined(__SANITIZE_ADDRESS__)
void before_switch(void** fake_stack, const void* stack, size_t bytes) {
  __sanitizer_start_switch_fiber(fake_stack, stack, bytes);
}
void after_switch(void* fake_stack, const void** from_stack, size_t* from_bytes) {
  __sanitizer_finish_switch_fiber(fake_stack, from_stack, from_bytes);
}
#else
void before_switch(void**, const void*, size_t) {}
void after_switch(void*, const void**, size_t*) {}
#endif

// Back to the scheduler until released.
void wait(Fiber& fiber, State state) {
  fiber.state = state;
  Block& block = *active;
  void* fake_stack = nullptr;
  before_switch(&fake_stack, block.scheduler_stack, block.scheduler_stack_bytes);
  switch_context(fiber.context, block.scheduler);
  after_switch(fake_stack, &block.scheduler_stack, &block.scheduler_stack_bytes);
}

void fiber_entry() {
  Block& block = *active;
  after_switch(nullptr, &block.scheduler_stack, &block.scheduler_stack_bytes);
  Fiber& fiber = block.fibers[static_cast<size_t>(block.running)];
  try {
    (*block.body)(block.shared);
  } catch (...) {
    if (!block.error) block.error = std::current_exception();
  }
  fiber.state = State::done;
  before_switch(nullptr, block.scheduler_stack, block.scheduler_stack_bytes);  // this stack is done
  switch_context(fiber.context, block.scheduler);                              // never resumed
}

const char* state_name(State state) {
  switch (state) {
    case State::ready:
      return "running";
    case State::at_barrier:
      return "at __syncthreads";
    case State::at_named_barrier:
      return "at a named barrier";
    case State::at_collective:
      return "at a warp collective";
    case State::done:
      return "returned";
  }
  return "?";
}

// The fiber at the start of fiber_entry. (Under AddressSanitizer its stack is first cleared of the
// poisoned redzones the previous block's frames left there: they never returned.)
void prepare(Fiber& fiber) {
  fiber.state = State::ready;
#if defined(__SANITIZE_ADDRESS__)
  __asan_unpoison_memory_region(fiber.stack.get(), kStackBytes);
#endif
  start_context(fiber.context, fiber.stack.get(), kStackBytes, fiber_entry);
}

// Runs one block's fibers until all have returned.
void run_block(Block& block) {
  const int threads = static_cast<int>(block.fibers.size());
  for (;;) {
    bool ran = false;
    for (int t = 0; t < threads && !block.error; ++t) {
      Fiber& fiber = block.fibers[static_cast<size_t>(t)];
      if (fiber.state != State::ready) continue;
      block.running = t;
      void* fake_stack = nullptr;
      before_switch(&fake_stack, fiber.stack.get(), kStackBytes);
      switch_context(block.scheduler, fiber.context);
      after_switch(fake_stack, nullptr, nullptr);
      block.running = -1;
      ran = true;
    }
    if (block.error) std::rethrow_exception(block.error);
    int done = 0, at_barrier = 0, at_named = 0, at_collective = 0;
    for (const Fiber& fiber : block.fibers) {
      done += fiber.state == State::done;
      at_barrier += fiber.state == State::at_barrier;
      at_named += fiber.state == State::at_named_barrier;
      at_collective += fiber.state == State::at_collective;
    }
    if (done == threads) {
      for (auto& [key, state] : block.states) state->finish();
      block.states.clear();
      for (int id = 0; id < kNamedBarriers; ++id)
        if (block.named[id].arrived != 0) {
          const Index3 b = block.fibers.front().coordinates.block_idx;
          throw_error("simt: block (", b.x, ", ", b.y, ", ", b.z, ") ended with ", block.named[id].arrived, " of ",
                      block.named[id].expected, " threads arrived at named barrier ", id,
                      " (its arrivals and waits do not balance)");
        }
      return;
    }
    // A barrier opens when every thread still running has reached it.
    bool released = false;
    if (at_barrier > 0 && at_barrier + done == threads) {
      for (Fiber& fiber : block.fibers)
        if (fiber.state == State::at_barrier) fiber.state = State::ready;
      ++block.epoch;
      released = true;
    }
    if (!ran && !released) {
      const Fiber* stuck = &*std::find_if(block.fibers.begin(), block.fibers.end(),
                                          [](const Fiber& fiber) { return fiber.state != State::done; });
      throw_error("simt: deadlock in block (", stuck->coordinates.block_idx.x, ", ", stuck->coordinates.block_idx.y,
                  ", ", stuck->coordinates.block_idx.z, "): ", at_barrier, " threads at __syncthreads, ", at_named,
                  " at named barriers, ", at_collective, " at a collective, ", done, " returned (thread ",
                  stuck->coordinates.thread_idx.x, " is ", state_name(stuck->state), ")");
    }
  }
}

}  // namespace

const ThreadCoordinates& current() { return running_fiber().coordinates; }

void launch(Index3 grid, Index3 block_shape, size_t shared_bytes,
            const std::function<void(unsigned char* shared)>& body) {
  LATHE_CHECK(active == nullptr, "simt: launch inside a launch");
  LATHE_CHECK(block_shape.y <= 1 && block_shape.z <= 1 && block_shape.x > 0, "simt: blocks along x only (got ",
              block_shape.x, " x ", block_shape.y, " x ", block_shape.z, ")");
  const Index3 grid_dim{grid.x, grid.y == 0 ? 1 : grid.y, grid.z == 0 ? 1 : grid.z};
  const Index3 block_dim{block_shape.x, 1, 1};
  Block block;
  block.fibers.resize(block_dim.x);
  block.body = &body;
  for (Fiber& fiber : block.fibers) fiber.stack.reset(new char[kStackBytes]);  // not zeroed
  // Shared memory between two guard zones, which must come through every block intact.
  AlignedBuffer shared(shared_bytes + 2 * kGuardBytes);
  unsigned char* const guards = shared.as<unsigned char>();
  block.shared = guards + kGuardBytes;
  block.shared_bytes = shared_bytes;
  struct Activation {
    explicit Activation(Block* block) { active = block; }
    ~Activation() { active = nullptr; }
  } activation(&block);
  for (unsigned z = 0; z < grid_dim.z; ++z)
    for (unsigned y = 0; y < grid_dim.y; ++y)
      for (unsigned x = 0; x < grid_dim.x; ++x) {
        std::memset(guards, kGuardByte, shared_bytes + 2 * kGuardBytes);
        std::memset(block.shared, kUnwrittenByte, shared_bytes);
        for (unsigned t = 0; t < block_dim.x; ++t) {
          Fiber& fiber = block.fibers[t];
          fiber.coordinates = {{t, 0, 0}, {x, y, z}, block_dim, grid_dim};
          prepare(fiber);
        }
        block.collective_arrivals.clear();
        block.states.clear();
        block.epoch = 0;
        block.granules.assign((shared_bytes + kGranuleBytes - 1) / kGranuleBytes, Granule{});
        block.proxy_fences.assign(block_dim.x, 0);
        for (NamedBarrier& barrier : block.named) barrier = {};
        run_block(block);
        for (size_t i = 0; i < kGuardBytes; ++i)
          LATHE_CHECK(guards[i] == kGuardByte && block.shared[shared_bytes + i] == kGuardByte, "simt: block (", x, ", ",
                      y, ", ", z, ") stored ", guards[i] != kGuardByte ? "before" : "past the end of", " its ",
                      shared_bytes, " bytes of shared memory");
      }
}

void sync_block() { wait(running_fiber(), State::at_barrier); }

void group_collective(int warps, const void* in, size_t in_bytes, void* out, size_t out_bytes, Combine combine,
                      const void* context) {
  Fiber& fiber = running_fiber();
  LATHE_CHECK(in_bytes <= kMaxCollectiveBytes && out_bytes <= kMaxCollectiveBytes, "simt: collective operands over ",
              kMaxCollectiveBytes, " bytes");
  const int threads = static_cast<int>(active->fibers.size());
  const int group_threads = warps * kWarpSize;
  LATHE_CHECK(warps > 0 && threads % group_threads == 0, "simt: a collective of ", warps, " warps in a block of ",
              threads, " threads");
  const int thread = static_cast<int>(fiber.coordinates.thread_idx.x);
  const int first = thread / group_threads * group_threads;
  std::memcpy(fiber.in, in, in_bytes);
  fiber.collective_warps = warps;
  int& arrived = active->collective_arrivals[{first / kWarpSize, warps}];
  if (++arrived < group_threads) {
    wait(fiber, State::at_collective);
  } else {
    // The last lane: every lane's input is in; combine, then release the others.
    arrived = 0;
    std::vector<unsigned char> ins(static_cast<size_t>(group_threads) * in_bytes),
        outs(static_cast<size_t>(group_threads) * std::max<size_t>(out_bytes, 1));
    for (int l = 0; l < group_threads; ++l) {
      const Fiber& mate = active->fibers[static_cast<size_t>(first + l)];
      if (first + l != thread)
        LATHE_CHECK(mate.state == State::at_collective && mate.collective_warps == warps, "simt: thread ", first + l,
                    " is ", state_name(mate.state), " while the rest of its ", warps, "-warp group is at a collective");
      std::memcpy(ins.data() + l * in_bytes, mate.in, in_bytes);
    }
    combine(context, ins.data(), outs.data());
    for (int l = 0; l < group_threads; ++l) {
      Fiber& mate = active->fibers[static_cast<size_t>(first + l)];
      std::memcpy(mate.out, outs.data() + l * out_bytes, out_bytes);
      if (first + l != thread) mate.state = State::ready;
    }
  }
  std::memcpy(out, fiber.out, out_bytes);
}

namespace {

NamedBarrier& arrive_at(int id, int threads) {
  LATHE_CHECK(id >= 1 && id < kNamedBarriers, "simt: named barrier ", id, " (ids 1-", kNamedBarriers - 1,
              "; 0 is __syncthreads)");
  const int block_threads = static_cast<int>(active->fibers.size());
  LATHE_CHECK(threads > 0 && threads % kWarpSize == 0 && threads <= block_threads, "simt: named barrier ", id, " for ",
              threads, " threads in a block of ", block_threads, " (whole warps, at most the block)");
  NamedBarrier& barrier = active->named[id];
  if (barrier.arrived == 0) barrier.expected = threads;
  LATHE_CHECK(barrier.expected == threads, "simt: named barrier ", id, " reached with counts ", barrier.expected,
              " and ", threads);
  return barrier;
}

// Counts the calling thread in; true when that completes the barrier (its waiters are released).
bool complete(NamedBarrier& barrier, int id) {
  if (++barrier.arrived < barrier.expected) return false;
  barrier.arrived = 0;
  for (Fiber& fiber : active->fibers)
    if (fiber.state == State::at_named_barrier && fiber.named_barrier == id) fiber.state = State::ready;
  return true;
}

}  // namespace

void barrier_sync(int id, int threads) {
  Fiber& fiber = running_fiber();
  NamedBarrier& barrier = arrive_at(id, threads);
  if (complete(barrier, id)) return;
  fiber.named_barrier = id;
  wait(fiber, State::at_named_barrier);
}

void barrier_arrive(int id, int threads) {
  running_fiber();
  complete(arrive_at(id, threads), id);
}

uint32_t shared_offset(const void* pointer) {
  running_fiber();
  const auto* p = static_cast<const unsigned char*>(pointer);
  LATHE_CHECK(p >= active->shared && p <= active->shared + active->shared_bytes,
              "simt: a shared-memory address of a pointer outside the block's shared memory");
  return static_cast<uint32_t>(p - active->shared);
}

const unsigned char* shared_at(uint32_t offset, size_t bytes) {
  running_fiber();
  LATHE_CHECK(size_t{offset} + bytes <= active->shared_bytes, "simt: shared-memory bytes ", offset, " .. ",
              size_t{offset} + bytes, " read, beyond the block's ", active->shared_bytes);
  return active->shared + offset;
}

namespace {

// The granules of bytes [pointer, pointer + bytes) of the block's shared memory, and who accesses
// them: `thread`, or the running thread.
struct SharedAccess {
  size_t first, end;
  int thread;
  SharedAccess(const void* pointer, size_t bytes, int thread_index) {
    const Fiber& fiber = running_fiber();
    const auto* p = static_cast<const unsigned char*>(pointer);
    LATHE_CHECK(p >= active->shared && p + bytes <= active->shared + active->shared_bytes,
                "simt: a shared-memory access outside the block's shared memory");
    const size_t offset = static_cast<size_t>(p - active->shared);
    first = offset / kGranuleBytes;
    end = (offset + bytes + kGranuleBytes - 1) / kGranuleBytes;
    thread = thread_index >= 0 ? thread_index : static_cast<int>(fiber.coordinates.thread_idx.x);
  }
};

std::string accessor(int thread) {
  return thread == kSeveral ? "other threads" : thread == kAsyncProxy ? "wgmma" : str_cat("thread ", thread);
}

[[noreturn]] void race(const char* what, size_t granule, int thread, int other) {
  const Index3 b = active->fibers.front().coordinates.block_idx;
  throw_error("simt: shared-memory race in block (", b.x, ", ", b.y, ", ", b.z, "): ", accessor(thread), " ", what,
              " bytes ", granule * kGranuleBytes, " .. ", (granule + 1) * kGranuleBytes, " that ", accessor(other),
              " accessed since the last __syncthreads (a missing barrier?)");
}

}  // namespace

void note_shared_write(const void* pointer, size_t bytes, int thread) {
  const SharedAccess access(pointer, bytes, thread);
  const uint64_t epoch = active->epoch;
  for (size_t g = access.first; g < access.end; ++g) {
    Granule& granule = active->granules[g];
    if (granule.write_epoch == epoch && granule.writer != access.thread)
      race("wrote", g, access.thread, granule.writer);
    if (granule.read_epoch == epoch && granule.reader != access.thread) race("wrote", g, access.thread, granule.reader);
    granule.writer = access.thread;
    granule.write_epoch = epoch;
    granule.writer_fences = active->proxy_fences[static_cast<size_t>(access.thread)];
  }
}

void note_shared_read(const void* pointer, size_t bytes, int thread) {
  const SharedAccess access(pointer, bytes, thread);
  const uint64_t epoch = active->epoch;
  for (size_t g = access.first; g < access.end; ++g) {
    Granule& granule = active->granules[g];
    if (granule.write_epoch == epoch && (granule.writer != access.thread || access.thread == kAsyncProxy))
      race("read", g, access.thread, granule.writer);
    if (access.thread == kAsyncProxy && granule.writer >= 0 &&
        active->proxy_fences[static_cast<size_t>(granule.writer)] <= granule.writer_fences) {
      const Index3 b = active->fibers.front().coordinates.block_idx;
      throw_error("simt: in block (", b.x, ", ", b.y, ", ", b.z, ") wgmma read bytes ", g * kGranuleBytes, " .. ",
                  (g + 1) * kGranuleBytes, " that thread ", granule.writer,
                  " wrote without a fence.proxy.async since (the tensor cores may read stale bytes)");
    }
    if (granule.read_epoch != epoch) {
      granule.reader = access.thread;
      granule.read_epoch = epoch;
    } else if (granule.reader != access.thread) {
      granule.reader = kSeveral;
    }
  }
}

void note_proxy_fence() {
  const Fiber& fiber = running_fiber();
  ++active->proxy_fences[fiber.coordinates.thread_idx.x];
}

BlockState& block_state(std::type_index type, int key, const std::function<std::unique_ptr<BlockState>()>& make) {
  running_fiber();
  std::unique_ptr<BlockState>& state = active->states[{type, key}];
  if (!state) state = make();
  return *state;
}

float shfl_xor(float value, int lane_mask) {
  struct Lane {
    float value;
    int mask;
  };
  return collective<Lane, float>({value, lane_mask}, [](const Lane(&ins)[kWarpSize], float(&outs)[kWarpSize]) {
    for (int lane = 0; lane < kWarpSize; ++lane) outs[lane] = ins[(lane ^ ins[lane].mask) & (kWarpSize - 1)].value;
  });
}

}  // namespace lathe::simt
