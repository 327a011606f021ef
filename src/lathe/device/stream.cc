#include "lathe/device/stream.h"

#include "lathe/device/cuda_runtime.h"

#if LATHE_HAVE_CUDA
#include "lathe/device/cuda_check.h"
#endif

namespace lathe::cuda {

#if LATHE_HAVE_CUDA

void* stream_handle() {
  use_selected_device();
  static cudaStream_t stream = [] {
    require_available("CUDA stream");
    cudaStream_t created = nullptr;
    LATHE_CUDA_CHECK("CUDA stream", cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return stream;
}

void stream_synchronize(const char* what) {
  LATHE_CUDA_CHECK(what, cudaStreamSynchronize(static_cast<cudaStream_t>(stream_handle())));
}

EventTimer::EventTimer() {
  require_available("CUDA event");
  cudaEvent_t start = nullptr, stop = nullptr;
  LATHE_CUDA_CHECK("event timer", cudaEventCreate(&start));
  LATHE_CUDA_CHECK("event timer", cudaEventCreate(&stop));
  start_ = start;
  stop_ = stop;
}

EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start() {
  LATHE_CUDA_CHECK("event timer",
                   cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_handle())));
}

void EventTimer::stop() {
  LATHE_CUDA_CHECK("event timer",
                   cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream_handle())));
}

double EventTimer::seconds() {
  LATHE_CUDA_CHECK("event timer", cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float milliseconds = 0;
  LATHE_CUDA_CHECK("event timer", cudaEventElapsedTime(&milliseconds, static_cast<cudaEvent_t>(start_),
                                                       static_cast<cudaEvent_t>(stop_)));
  return milliseconds * 1e-3;
}

#else

void* stream_handle() {
  require_available("CUDA stream");
  return nullptr;
}
void stream_synchronize(const char*) {}
EventTimer::EventTimer() { require_available("CUDA event"); }
EventTimer::~EventTimer() = default;
void EventTimer::start() {}
void EventTimer::stop() {}
double EventTimer::seconds() { return 0; }

#endif

}  // namespace lathe::cuda
