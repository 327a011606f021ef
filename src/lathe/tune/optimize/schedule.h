// The schedule space of `lathe optimize` (docs/optimizer.md): how a GEMM followed by an epilogue
// chain (the suite's fusion problems: y = chain(x w^T + bias), x: (m, k), w: (n, k)) is computed.
// A KernelSchedule is plain data, like an op's Config: tile sizes per cache level, loop order,
// vector width, unroll, packing, where the epilogue runs and which axis the threads split. The
// generator (fused_gemm_generator.h) turns one into C++ source for the kernel lab's C ABI; the
// search (beam_search.h) moves through the space by granular steps (schedule_moves).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/ops/config.h"

namespace lathe {

struct KernelSchedule {
  // 0 "dot": no packing; a register tile of mr rows of x against nr rows of w, each accumulated
  //   as vectors along k and reduced at the end. 1 "packed": w is transposed into (k, nr vectors)
  //   panels first; the tile is mr rows x nr vectors of columns, built from broadcasts of x
  //   (outer products), so the epilogue can run on the accumulators before the store.
  // 2 "blocked": the BLIS loop nest. Per (column block, k block) w is packed into (kc, nr vectors)
  //   micro-panels with vector-wide transposes; with pack_x, per row block of mc rows x is packed
  //   into (kc, mr) micro-panels, so the tile's broadcasts read one contiguous stream (more than 8
  //   rows of x a power of two apart would overflow an L1 set); both buffers are per thread and
  //   kept between calls.
  int form = 0;
  int vector_width = 16;  // floats per vector: 16 (AVX-512), 8 (AVX2), 4 (portable)
  int mr = 2;             // rows of y per register tile
  int nr = 2;             // dot: rows of w per tile; packed: vectors of columns per tile
  int kc = 0;             // k per L1 block (a multiple of vector_width); 0: all of k
  int nc = 64;            // columns of y per L2 block
  int mc = 0;             // blocked form: rows of x per block (a multiple of mr; 0: the thread's rows); else 0
  int pack_x = 0;         // blocked form: 1 packs x's block into panels, 0 broadcasts from x's rows in place; else 0
  int loop_order = 0;     // 0: column blocks outermost; 1: blocks of 8 register-tile rows outermost
                          // (blocked form: 0 each w micro-panel against every x panel of the block, 1 the reverse)
  int unroll = 1;         // unroll factor of the k loop
  int epilogue = 0;       // 0: a separate pass after the GEMM; 1: fused (on the accumulators or the hot block)
  int thread_axis = 0;    // 0: threads split rows; 1: threads split columns

  template <class Visitor>
  void visit(Visitor&& visitor) {
    visitor("form", form), visitor("vector_width", vector_width), visitor("mr", mr), visitor("nr", nr);
    visitor("kc", kc), visitor("nc", nc), visitor("mc", mc), visitor("pack_x", pack_x);
    visitor("loop_order", loop_order);
    visitor("unroll", unroll);
    visitor("epilogue", epilogue), visitor("thread_axis", thread_axis);
  }
  bool operator==(const KernelSchedule& other) const { return key() == other.key(); }
  // "form=0,vector_width=16,mr=2,...": the schedule's identity (cache key, trace).
  std::string key() const;
  Json to_json() const;
  // Throws lathe::Error naming the field when `text` is not a valid schedule.
  static KernelSchedule parse(const std::string& text);
  // From a key's fields; a key written before pack_x existed (every blocked kernel packed x) reads
  // as pack_x = 1 in the blocked form. Throws lathe::Error on a missing or unknown field.
  static KernelSchedule from_params(ConfigParams params, const std::string& context);
  // Columns of y one register tile covers.
  int tile_columns() const { return form == 0 ? nr : nr * vector_width; }
  // The largest mr of the form (the blocked form's packed x panels allow the tall tiles BLIS uses).
  int max_mr() const { return form == 2 ? 16 : 8; }
  // Vector registers the register tile needs (accumulators plus operands).
  int registers() const { return form == 0 ? mr * nr + mr + nr : mr * nr + nr + 1; }
};

// The limits of the space on this machine: the widest vector the active ISA runs, the vector
// registers it has.
struct ScheduleLimits {
  int max_vector_width = 16;
  int vector_registers = 32;
};
ScheduleLimits schedule_limits_for_this_machine();

// For the families' validity rules (block sizes, rows per task).
inline bool power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

// Whether the generator supports the schedule under the limits (every field in range).
bool schedule_valid(const KernelSchedule& schedule, const ScheduleLimits& limits);

// The naive start of a search: the dot form with a small tile, a separate epilogue pass.
KernelSchedule naive_schedule(const ScheduleLimits& limits);

// One granular step from a schedule: its name ("mr+1", "pack", "fuse-epilogue", ...) and the result.
struct ScheduleMove {
  std::string name;
  KernelSchedule schedule;
};
// Every valid schedule one step away.
std::vector<ScheduleMove> schedule_moves(const KernelSchedule& schedule, const ScheduleLimits& limits);

}  // namespace lathe
