#include "lathe/tune/optimize/schedule.h"

#include <algorithm>

#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"

namespace lathe {

std::string KernelSchedule::key() const { return config_to_params(*this).to_string(); }

Json KernelSchedule::to_json() const {
  Json json = Json::object();
  for (const auto& [name, value] : config_to_params(*this).entries) json.set(name, value);
  return json;
}

KernelSchedule KernelSchedule::from_params(ConfigParams params, const std::string& context) {
  if (params.find("pack_x") == nullptr) {
    const int64_t* form = params.find("form");
    params.entries.push_back({"pack_x", form != nullptr && *form == 2 ? 1 : 0});
  }
  return config_from_params<KernelSchedule>(params, context);
}

KernelSchedule KernelSchedule::parse(const std::string& text) {
  KernelSchedule schedule = from_params(ConfigParams::parse(text), "schedule");
  LATHE_CHECK(schedule_valid(schedule, ScheduleLimits{16, 32}), "schedule '", text, "' is outside the space");
  return schedule;
}

ScheduleLimits schedule_limits_for_this_machine() {
  Isa isa = active_isa();
  if (isa >= Isa::avx512) return {16, 32};
  if (isa >= Isa::avx2) return {8, 16};
  return {4, 16};
}

bool schedule_valid(const KernelSchedule& s, const ScheduleLimits& limits) {
  bool width =
      (s.vector_width == 4 || s.vector_width == 8 || s.vector_width == 16) && s.vector_width <= limits.max_vector_width;
  const bool mc = s.form == 2 ? s.mc >= 0 && s.mc <= 4096 && s.mc % s.mr == 0 : s.mc == 0;
  const bool pack_x = s.form == 2 ? s.pack_x == 0 || s.pack_x == 1 : s.pack_x == 0;
  return width && s.form >= 0 && s.form <= 2 && s.mr >= 1 && s.mr <= s.max_mr() && s.nr >= 1 &&
         s.nr <= (s.form == 0 ? 8 : 4) && s.registers() <= limits.vector_registers && s.kc >= 0 && s.kc <= 2048 &&
         (s.kc == 0 || s.kc % s.vector_width == 0) && s.nc >= s.tile_columns() && s.nc <= 4096 && mc && pack_x &&
         (s.loop_order == 0 || s.loop_order == 1) && (s.unroll == 1 || s.unroll == 2 || s.unroll == 4) &&
         (s.epilogue == 0 || s.epilogue == 1) && (s.thread_axis == 0 || s.thread_axis == 1);
}

KernelSchedule naive_schedule(const ScheduleLimits& limits) {
  KernelSchedule schedule;
  schedule.vector_width = limits.max_vector_width;
  return schedule;
}

namespace {

// The most rows (at most `cap`) a register tile of nr vectors of columns holds in the registers:
// its accumulators, nr vectors of w and one broadcast of x.
int tallest_rows(int nr, const ScheduleLimits& limits, int cap) {
  return std::min(cap, (limits.vector_registers - 1 - nr) / nr);
}

}  // namespace

std::vector<ScheduleMove> schedule_moves(const KernelSchedule& from, const ScheduleLimits& limits) {
  std::vector<ScheduleMove> moves;
  auto add = [&](const std::string& name, auto change) {
    KernelSchedule next = from;
    change(next);
    if (next.nc < next.tile_columns()) next.nc = next.tile_columns();  // a column block holds a tile
    if (next.kc % next.vector_width != 0) next.kc = 0;
    if (next.form != 2) next.mc = 0, next.pack_x = 0;
    if (next.form == 2 && next.mc % next.mr != 0) next.mc = std::max(1, next.mc / next.mr) * next.mr;
    if (!(next == from) && schedule_valid(next, limits)) moves.push_back({name, next});
  };
  if (from.form < 2)
    add(from.form == 0 ? "pack" : "unpack", [](KernelSchedule& s) {
      s.form = 1 - s.form;
      s.nr = s.form == 1 ? 2 : 4;  // a tile of 2 vectors of columns (at least 4 rows), or of 4 rows of w
      if (s.form == 1) s.mr = std::max(s.mr, 4);
    });
  // pack-x: to the blocked form (x packed too; from the dot form w is packed as well, a tile of
  // 2 vectors of columns); unpack-x: back to the packed form.
  add(from.form == 2 ? "unpack-x" : "pack-x", [&](KernelSchedule& s) {
    s.mc = 0;
    if (s.form == 2) {
      s.form = 1;
      s.mr = std::min(s.mr, 8);
      return;
    }
    if (s.form == 0) s.nr = 2;
    s.form = 2;  // the tallest tile the registers hold, and column blocks that amortise packing x
    s.pack_x = 1;
    s.mr = tallest_rows(s.nr, limits, 16);
    s.nc = std::max(s.nc, 512);
  });
  if (from.form == 2) {
    // x's rows in place: a tile no taller than an L1 set's 8 ways and 4 vectors wide (brgemm's
    // shape), the whole k per block (no partial sums of y to reread); back: the tallest tile again.
    add(from.pack_x == 1 ? "x-rows-in-place" : "x-panels", [&](KernelSchedule& s) {
      s.pack_x = 1 - s.pack_x;
      s.nr = s.pack_x == 0 && limits.vector_registers >= 32 ? 4 : 2;
      s.mr = tallest_rows(s.nr, limits, s.pack_x == 0 ? 8 : 16);
      if (s.pack_x == 0) s.kc = 0;
    });
    add("mc/2", [](KernelSchedule& s) { s.mc = s.mc == 0 ? 16 * s.mr : s.mc / 2; });
    add("mc*2", [](KernelSchedule& s) { s.mc = s.mc == 0 ? 0 : s.mc >= 2048 ? 0 : s.mc * 2; });
  }
  add("mr+1", [](KernelSchedule& s) { s.mr += 1; });
  add("mr-1", [](KernelSchedule& s) { s.mr -= 1; });
  add("nr+1", [](KernelSchedule& s) { s.nr += 1; });
  add("nr-1", [](KernelSchedule& s) { s.nr -= 1; });
  add("mr+1,nr-1", [](KernelSchedule& s) { s.mr += 1, s.nr -= 1; });
  add("mr-1,nr+1", [](KernelSchedule& s) { s.mr -= 1, s.nr += 1; });
  add("kc/2", [](KernelSchedule& s) { s.kc = s.kc == 0 ? 512 : s.kc / 2; });
  add("kc*2", [](KernelSchedule& s) { s.kc = s.kc == 0 ? 0 : s.kc >= 1024 ? 0 : s.kc * 2; });
  add("nc/2", [](KernelSchedule& s) { s.nc /= 2; });
  add("nc*2", [](KernelSchedule& s) { s.nc *= 2; });
  add("loop-order", [](KernelSchedule& s) { s.loop_order = 1 - s.loop_order; });
  add("unroll*2", [](KernelSchedule& s) { s.unroll *= 2; });
  add("unroll/2", [](KernelSchedule& s) { s.unroll /= 2; });
  add(from.epilogue == 0 ? "fuse-epilogue" : "separate-epilogue",
      [](KernelSchedule& s) { s.epilogue = 1 - s.epilogue; });
  add("thread-axis", [](KernelSchedule& s) { s.thread_axis = 1 - s.thread_axis; });
  add("vector-width/2", [](KernelSchedule& s) { s.vector_width /= 2; });
  add("vector-width*2", [](KernelSchedule& s) { s.vector_width *= 2; });
  return moves;
}

}  // namespace lathe
