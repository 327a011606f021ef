// Tensors in GPU memory and copies between host and device. Device tensors come from the caching
// allocator (device/caching_allocator.h) of the current device and carry Device::cuda in their
// views; host code may pass them to ops (whose CUDA implementations run on them) but never read
// their elements. Pinned host tensors are ordinary host tensors in page-locked memory: copies from
// and to them run at full PCIe/NVLink speed and may be asynchronous (checkpoints use them).
//
// All copies here are synchronous with respect to the host (they return when the data is in
// place), on lathe's stream (device/stream.h). Every function throws lathe::Error "... no usable
// CUDA device: ..." in a build or on a machine without one, unless a test's HostSimulation
// (cuda_runtime.h) makes host memory stand in for the device's.
#pragma once

#include <optional>

#include "lathe/core/tensor.h"
#include "lathe/device/caching_allocator.h"

namespace lathe::cuda {

// How copy() moves a view in one 2-D copy: `rows` rows of `cols` contiguous elements, `pitch`
// elements apart. Empty when the layout does not allow it (a last axis that is not contiguous,
// leading axes not evenly spaced, rows overlapping). Host logic, defined in every build.
struct RowLayout {
  int64_t rows = 0, cols = 0, pitch = 0;
};
std::optional<RowLayout> row_layout(const TensorView& view);

// A contiguous device tensor; `what` names it in an out-of-memory error.
Tensor device_empty(const Shape& shape, DType dtype, const std::string& what = "tensor");
Tensor device_zeros(const Shape& shape, DType dtype, const std::string& what = "tensor");
// A contiguous copy on the device of a host view (any layout), and back.
Tensor to_device(const TensorView& host);
Tensor to_host(const TensorView& device);
// Copies between two views of the same shape and dtype; either may be host or device (host to
// host is a plain memory copy, on any machine), and the destination may be a strided view (rows
// of a wider buffer).
void copy(const TensorView& destination, const TensorView& source);
// Fills a device view with a byte pattern (0: zeros; 0xFF: NaN for floats, the poison of tests).
void fill_bytes(const TensorView& device, int byte);
// A contiguous host tensor in page-locked memory.
Tensor pinned_empty(const Shape& shape, DType dtype);

// The allocator of the current device: statistics for `lathe bench` and memory reports.
DeviceMemoryStats memory_stats();
void empty_cache();
// Restarts the statistics' high-water mark at the bytes in use now (the peak of one training step).
void reset_memory_peak();

}  // namespace lathe::cuda

namespace lathe {

// Device-generic allocation for code that runs on either (the autograd ops, the optimizer):
// a contiguous tensor where `device` says, host memory or the caching allocator's.
Tensor empty_on(Device device, const Shape& shape, DType dtype, const std::string& what = "tensor");
Tensor zeros_on(Device device, const Shape& shape, DType dtype, const std::string& what = "tensor");
// A contiguous copy of a view (any layout the copy supports) on the view's own device.
Tensor copy_on_same_device(const TensorView& view);
// `tensor` itself on the host; a host copy of it from the GPU (for the few values host code
// reads: a loss, token ids, expert counts).
Tensor on_host(const Tensor& tensor);
// The reverse: a tensor built on the host (a batch's ids, a constant) where `device` says: itself
// for the host, a copy on the GPU.
Tensor on_device(Device device, const Tensor& host);
// Element 0 of a one-element tensor (a loss) wherever it lives: one small copy from the GPU.
double scalar_value(const Tensor& tensor);

}  // namespace lathe
