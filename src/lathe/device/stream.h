// The stream lathe's CUDA work runs on, and events to time it. One stream per process (the
// device's legacy default stream is not used, so other libraries' work never serialises with
// lathe's by accident); ops enqueue on it and return without waiting. Opaque handles keep CUDA's
// headers out of this one: kernels cast stream_handle() to cudaStream_t.
#pragma once

namespace lathe::cuda {

// cudaStream_t of lathe's stream on the current device, created on first use.
void* stream_handle();
// Waits for the work queued on lathe's stream; `what` names the caller in an error.
void stream_synchronize(const char* what);

// A pair of events around work on lathe's stream: GPU time, not host time.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  void stop();
  double seconds();  // waits for the stop event

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace lathe::cuda
