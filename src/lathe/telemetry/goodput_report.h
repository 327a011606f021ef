// Goodput accounting of a run directory from its event log (train/goodput_events.h), for
// `lathe goodput`: total time, goodput %, badput by category, disruptions, MTTI and MTTR.
//
// Accounting (every second of the job's wall-clock time lands in exactly one category):
//   The job spans from the earliest event of any process (the supervisor's job_start, else the
//   first trainer's process start) to the latest. Each event file contributes labelled intervals;
//   where intervals overlap (the ranks of one group run at the same time; a checkpoint save sits
//   inside the step loop) the segment takes the category that comes first in this order:
//     data_loading        a productive step's time waiting for its batches (data_seconds, placed
//                         at the step's start)
//     checkpoint_save     time a checkpoint save blocked training (the background write overlaps
//                         steps and costs nothing here)
//     checkpoint_restore  loading the checkpoint a restarted group resumes from
//     evaluation          validation losses
//     startup             start-up work (machine peaks, autotuning) and first-step warm-up: the
//                         first step of each process beyond that process's median step time
//     progress_lost       step executions whose result was thrown away: a step is lost when a
//                         later attempt (another start of the worker group) ran the same step
//                         again; plus the unrecorded tail of a failed attempt (from its last
//                         recorded event to the failure: a step or a checkpoint cut short)
//     productive          every other step execution (the last attempt that ran a step wins)
//     initialization      trainer process start until its training loop begins (less the above)
//     recovery            supervisor: from a failure until the next group started
//     resize              supervisor: from a planned stop (scale up) until the next group started
//     other               covered by nothing above (process exits, supervisor bookkeeping)
//   goodput = productive / total; badput = every other category.
// Disruptions: every failure and every resize the supervisor recorded; a resize is planned and
// counts in neither MTTI nor MTTR (its time is the "resize" category).
//   MTTI (mean time between interruptions) = total time / failures (none: not reported).
//   MTTR = mean over failures of (end of the first productive step of a later attempt that
//   started after the disruption - the disruption's time). For a hang the failure time is the last heartbeat, so
//   MTTR includes the heartbeat timeout; mttr_after_detection_seconds starts the clock when the
//   supervisor noticed instead.
// Errors: a malformed event (missing time fields) throws lathe::Error naming its file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

// Category names in priority order (see above); "productive" is the goodput.
const std::vector<std::string>& goodput_categories();

struct GoodputDisruption {
  std::string kind;      // "failure" or "resize"
  std::string reason;    // "rank exited with code 1", "heartbeat timeout", "capacity 2 > 1"
  double time = 0;       // Unix seconds: when it failed (or the resize was decided)
  double detected = 0;   // when the supervisor noticed (== time for a resize or crash)
  double recovered = 0;  // end of the first productive step after it; 0: never recovered
};

// One start of a worker group, for the timeline: from its first to its last recorded moment (a
// failure or resize that ended it included).
struct GoodputAttempt {
  std::string attempt;        // the attempt's name (LATHE_ATTEMPT, an MPI job id or a pid)
  double start = 0, end = 0;  // Unix seconds
  int64_t world = 0;          // ranks that recorded a process event (the largest "world" they gave)
  std::string outcome;        // "finished", "interrupted", "failed: <reason>", "resized", "ended" (no record)
};

struct GoodputReport {
  double start = 0, end = 0;  // Unix seconds
  double total_seconds = 0;
  std::vector<std::pair<std::string, double>> seconds_by_category;  // goodput_categories() order
  double goodput_fraction = 0;                                      // productive / total (0 for an empty log)
  int64_t productive_steps = 0;  // step executions counted productive (all ranks' copies count once)
  int64_t lost_steps = 0;        // step executions redone later
  int64_t attempts = 0;          // starts of a worker group (processes started together)
  std::vector<GoodputDisruption> disruptions;
  std::vector<GoodputAttempt> timeline;     // attempts in start order
  double mtti_seconds = 0;                  // NaN without disruptions
  double mttr_seconds = 0;                  // NaN without a recovered disruption
  double mttr_after_detection_seconds = 0;  // NaN likewise

  double seconds(const std::string& category) const;
};

// events: read_goodput_events(run_dir).
GoodputReport analyze_goodput(const std::vector<Json>& events);

// A table for people: total, goodput %, one row per badput category, disruptions, MTTI, MTTR.
std::string format_goodput_table(const GoodputReport& report);
// {"start_unix_seconds" (a string, microseconds), "total_seconds", "goodput_percent", "seconds": {category: s},
//  "percent": {...}, "disruptions": [{"kind", "planned", "reason", "time", "detected", "recovered"}],
//  "timeline": [{"attempt", "start", "end", "world", "outcome"}] (times in seconds since start_unix_seconds),
//  "mtti_seconds", "mttr_seconds", "mttr_after_detection_seconds"} (NaN: null).
Json goodput_report_to_json(const GoodputReport& report);
// One bar per category: its share of the job's wall-clock time; below it the timeline, one row per
// attempt (labelled with its world size and outcome) with a mark at each failure.
std::string goodput_report_svg(const GoodputReport& report, const std::string& title);
// The same figures as TensorBoard scalars (goodput/percent, goodput/<category>_seconds, ...) at
// step = productive steps, into <log_dir>. Throws lathe::Error when the directory is not writable.
void write_goodput_tensorboard(const GoodputReport& report, const std::string& log_dir);

}  // namespace lathe
