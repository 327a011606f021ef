#include "lathe/tune/optimize/beam_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace lathe {

int SearchTrace::compiled() const {
  int count = 0;
  for (const auto& candidate : candidates) count += candidate.measurement.compiled;
  return count;
}

int SearchTrace::passed() const {
  int count = 0;
  for (const auto& candidate : candidates) count += candidate.measurement.passed;
  return count;
}

Json SearchTrace::to_json() const {
  Json json = Json::object();
  Json rows = Json::array();
  for (const auto& c : candidates) {
    Json row = Json::object();
    row.set("step", c.step);
    row.set("move", c.move);
    row.set("parent", c.parent);
    row.set("schedule", c.schedule.to_json());
    row.set("key", c.schedule.key());
    row.set("predicted_seconds", c.predicted_seconds);
    row.set("ranked_seconds", c.ranked_seconds);
    row.set("verdict", c.measurement.verdict);
    if (!c.measurement.detail.empty()) row.set("detail", c.measurement.detail);
    row.set("passed", c.measurement.passed);
    row.set("compiled", c.measurement.compiled);
    if (c.measurement.passed) row.set("median_seconds", c.measurement.seconds);
    row.set("at_seconds", c.at_seconds);
    rows.push(row);
  }
  json.set("candidates", rows);
  Json step_rows = Json::array();
  for (const auto& s : steps) {
    Json row = Json::object();
    row.set("step", s.step);
    row.set("measured", s.measured);
    row.set("best_seconds", s.best_seconds);
    row.set("best_key", s.best_key);
    row.set("at_seconds", s.at_seconds);
    step_rows.push(row);
  }
  json.set("steps", step_rows);
  json.set("found", found);
  if (found) {
    json.set("best_schedule", best.to_json());
    json.set("best_key", best.key());
    json.set("best_seconds", best_seconds);
  }
  json.set("measured", measured());
  json.set("compiled", compiled());
  json.set("passed", passed());
  json.set("stop_reason", stop_reason);
  return json;
}

namespace {

// exp(mean log(measured / predicted)) over the passed candidates of `structure` (all when none).
double correction(const KernelSpace& space, const std::vector<SearchCandidate>& measured, int structure) {
  for (int pass = 0; pass < 2; ++pass) {
    double total = 0;
    int count = 0;
    for (const auto& c : measured)
      if (c.measurement.passed && c.predicted_seconds > 0 && (pass == 1 || space.structure(c.schedule) == structure)) {
        total += std::log(c.measurement.seconds / c.predicted_seconds);
        ++count;
      }
    if (count > 0) return std::exp(total / count);
  }
  return 1.0;
}

}  // namespace

SearchTrace beam_search(const KernelSpace& space, const PredictFn& predict, const MeasureFn& measure,
                        const SearchOptions& options, const ClockFn& clock) {
  const Schedule start = options.start.empty() ? space.naive() : space.parse(options.start);
  SearchTrace trace;
  const double began = clock();
  const int per_step = options.per_step > 0 ? options.per_step : 2 * options.beam;
  std::set<std::string> seen;
  auto run = [&](int step, const std::string& move, const std::string& parent, const Schedule& schedule,
                 double predicted, double ranked) {
    SearchCandidate candidate{step, move, parent, schedule, predicted, ranked, measure(schedule), 0};
    candidate.at_seconds = clock() - began;
    trace.candidates.push_back(candidate);
  };
  auto better = [](const SearchCandidate* a, const SearchCandidate* b) {
    if (a->measurement.seconds != b->measurement.seconds) return a->measurement.seconds < b->measurement.seconds;
    return a->schedule.key() < b->schedule.key();
  };
  auto record_step = [&](int step, int measured) {
    SearchStep row{step, measured, 0, "", clock() - began};
    if (trace.found) row.best_seconds = trace.best_seconds, row.best_key = trace.best.key();
    trace.steps.push_back(row);
  };
  auto update_best = [&]() {
    bool improved = false;
    for (const auto& c : trace.candidates)
      if (c.measurement.passed && (!trace.found || c.measurement.seconds < trace.best_seconds)) {
        trace.found = true, trace.best = c.schedule, trace.best_seconds = c.measurement.seconds;
        improved = true;
      }
    return improved;
  };

  seen.insert(start.key());
  double predicted = predict(start);
  run(0, "start", "", start, predicted, predicted);
  update_best();
  record_step(0, 1);
  int stale = 0;
  for (int step = 1; step <= options.max_steps; ++step) {
    if (clock() - began >= options.budget_seconds) {
      trace.stop_reason = "budget";
      break;
    }
    // The beam: the fastest measured schedules that passed.
    std::vector<const SearchCandidate*> passed;
    for (const auto& c : trace.candidates)
      if (c.measurement.passed) passed.push_back(&c);
    std::sort(passed.begin(), passed.end(), better);
    if (passed.size() > static_cast<size_t>(options.beam)) passed.resize(options.beam);
    std::vector<Schedule> beam;
    for (const auto* c : passed) beam.push_back(c->schedule);
    if (beam.empty()) beam.push_back(start);  // nothing passed yet: widen around the start
    // Unseen neighbours, ranked by the corrected model.
    struct Proposal {
      std::string move, parent;
      Schedule schedule;
      double predicted, ranked;
    };
    std::vector<Proposal> proposals;
    for (const auto& from : beam)
      for (const auto& move : space.moves(from)) {
        if (!seen.insert(move.schedule.key()).second) continue;
        double model = predict(move.schedule);
        proposals.push_back({move.name, from.key(), move.schedule, model,
                             model * correction(space, trace.candidates, space.structure(move.schedule))});
      }
    if (proposals.empty()) {
      trace.stop_reason = "space exhausted";
      break;
    }
    std::stable_sort(proposals.begin(), proposals.end(), [](const Proposal& a, const Proposal& b) {
      return a.ranked != b.ranked ? a.ranked < b.ranked : a.schedule.key() < b.schedule.key();
    });
    // Diversity: a structure (packing form, one or two passes) never measured gets its
    // best-ranked candidate into this step, so a structural change is tried even while the model
    // prefers small tweaks.
    for (int structure = 0; structure < space.structures(); ++structure) {
      bool tried = std::any_of(trace.candidates.begin(), trace.candidates.end(),
                               [&](const SearchCandidate& c) { return space.structure(c.schedule) == structure; });
      auto first = std::find_if(proposals.begin(), proposals.end(),
                                [&](const Proposal& p) { return space.structure(p.schedule) == structure; });
      if (tried || first == proposals.end() || first - proposals.begin() < per_step) continue;
      std::rotate(proposals.begin() + (per_step - 1), first, first + 1);
    }
    int measured = 0;
    for (const auto& proposal : proposals) {
      // Stop before a candidate that would likely end past the budget (at the mean time per
      // candidate so far), so the search keeps within it rather than overrunning by one.
      const double spent = clock() - began;
      const double per_candidate = spent / std::max<size_t>(trace.candidates.size(), 1);
      if (measured == per_step) break;
      if (spent + per_candidate > options.budget_seconds) {
        trace.stop_reason = "budget";
        break;
      }
      run(step, proposal.move, proposal.parent, proposal.schedule, proposal.predicted, proposal.ranked);
      ++measured;
    }
    // Proposals not measured this step may come back later (from another beam member).
    for (size_t i = static_cast<size_t>(measured); i < proposals.size(); ++i) seen.erase(proposals[i].schedule.key());
    bool improved = update_best();
    record_step(step, measured);
    if (trace.stop_reason == "budget") break;
    stale = improved ? 0 : stale + 1;
    if (stale >= options.patience) {
      trace.stop_reason = str_cat("no improvement in ", options.patience, " steps");
      break;
    }
    if (step == options.max_steps) trace.stop_reason = "max steps";
  }
  if (trace.stop_reason.empty()) trace.stop_reason = "max steps";
  return trace;
}

}  // namespace lathe
