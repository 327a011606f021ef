// What the kernel lab's parent and its worker process share for one run of a candidate: a task
// file (JSON: the tensors, their byte ranges in the data file, the dims, the thread count) and a
// data file holding the inputs (written by the parent, mapped read-only by the worker) and the
// outputs (written back by the worker after a run, compared by the parent). Every tensor starts on
// a page boundary.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lathe/bench/lab/lathe_lab.h"
#include "lathe/core/json.h"
#include "lathe/core/tensor.h"

namespace lathe {

struct LabTensorSlot {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  int64_t offset = 0, bytes = 0;  // in the data file
};

struct LabTask {
  std::vector<LabTensorSlot> inputs, outputs;
  std::vector<std::pair<std::string, int64_t>> dims;
  int threads = 1;
  int64_t input_region_bytes = 0;  // [0, this): inputs, page-aligned; outputs follow
  int64_t total_bytes = 0;

  Json to_json() const;
  static LabTask from_json(const Json& json);
};

// Lays out the tensors (inputs first) and the integer dims of a shape text ("m=6,n=256,k=40").
LabTask make_lab_task(const std::vector<std::pair<std::string, TensorView>>& inputs,
                      const std::vector<std::pair<std::string, TensorView>>& outputs, const std::string& shape_text,
                      int threads);
LabDType lab_dtype(DType dtype);

// The worker: `lathe lab --worker DIR --mode check|time`, run in its own process by the parent
// (lab_sandbox.h). Loads DIR/candidate.so, maps DIR/data.bin, runs the candidate on NaN-poisoned,
// guard-paged outputs and copies them back. check: one run, then exit. time: reads commands on
// stdin ("run": one timed run, answered "time SECONDS"; "finish": copy the outputs back, answer
// "perf ..." with the hardware counters of the timed runs, exit). Exit codes: kLabWorker*.
int run_lab_worker(const std::string& dir, const std::string& mode);

constexpr int kLabWorkerCandidateFailed = 10;  // lathe_candidate returned non-zero
constexpr int kLabWorkerOutOfBounds = 11;      // touched a guard page around an output
constexpr int kLabWorkerWroteInput = 12;       // wrote to a read-only input
constexpr int kLabWorkerLoadFailed = 13;       // dlopen / dlsym
constexpr int kLabWorkerSetupFailed = 14;      // task or data file unreadable

}  // namespace lathe
