#include "lathe/device/device_tensor.h"

#include <cstring>
#include <memory>

#include "lathe/device/cuda_runtime.h"
#include "lathe/device/simulated_memory.h"
#include "lathe/device/stream.h"

#if LATHE_HAVE_CUDA
#include "lathe/device/cuda_check.h"
#endif

namespace lathe::cuda {

std::optional<RowLayout> row_layout(const TensorView& view) {
  const int rank = view.rank();
  RowLayout layout;
  layout.cols = rank == 0 ? 1 : view.dim(rank - 1);
  if (rank > 0 && layout.cols > 1 && view.stride(rank - 1) != 1) return std::nullopt;
  layout.rows = layout.cols == 0 ? 0 : view.numel() / layout.cols;
  layout.pitch = layout.cols;
  // Leading axes of extent > 1, innermost first: the innermost sets the pitch, each outer one must
  // step over exactly the rows inside it.
  int64_t inner_stride = 0, inner_rows = 1;
  for (int axis = rank - 2; axis >= 0; --axis) {
    if (view.dim(axis) <= 1) continue;
    if (inner_stride == 0) {
      layout.pitch = view.stride(axis);
    } else if (view.stride(axis) != inner_stride * inner_rows) {
      return std::nullopt;
    }
    inner_stride = view.stride(axis);
    inner_rows = view.dim(axis);
  }
  if (layout.rows > 1 && layout.pitch < layout.cols) return std::nullopt;
  return layout;
}

#if LATHE_HAVE_CUDA

namespace {

CachingAllocator& allocator() {
  static CachingAllocator instance(CachingAllocator::Backend{
      [](int64_t bytes) -> void* {
        use_selected_device();
        void* pointer = nullptr;
        if (cudaMalloc(&pointer, static_cast<size_t>(bytes)) != cudaSuccess) {
          cudaGetLastError();  // out of memory is not sticky: clear it so the next call starts clean
          return nullptr;
        }
        return pointer;
      },
      [](void* pointer) { cudaFree(pointer); },
      [](int64_t* free_bytes, int64_t* total_bytes) {
        use_selected_device();
        size_t free_memory = 0, total_memory = 0;
        cudaMemGetInfo(&free_memory, &total_memory);
        *free_bytes = static_cast<int64_t>(free_memory);
        *total_bytes = static_cast<int64_t>(total_memory);
      }});
  return instance;
}

cudaMemcpyKind copy_kind(Device to, Device from) {
  if (to == Device::cuda) return from == Device::cuda ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return from == Device::cuda ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
}

}  // namespace

Tensor backend_empty(const Shape& shape, DType dtype, const std::string& what) {
  require_available("device tensor");
  const int64_t bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype));
  TensorView view;
  view.shape = shape;
  view.strides = contiguous_strides(shape);
  view.dtype = dtype;
  view.device = Device::cuda;
  view.data = allocator().allocate(bytes, str_cat(what, " cuda:", dtype_name(dtype), shape.to_string()));
  return Tensor::adopt(std::shared_ptr<void>(view.data, [](void* pointer) { allocator().free(pointer); }), view);
}

void backend_copy_rows(const TensorView& destination, const RowLayout& to, const TensorView& source,
                       const RowLayout& from) {
  const size_t element = dtype_size(source.dtype);
  LATHE_CUDA_CHECK("copy",
                   cudaMemcpy2DAsync(destination.data, to.pitch * element, source.data, from.pitch * element,
                                     from.cols * element, from.rows, copy_kind(destination.device, source.device),
                                     static_cast<cudaStream_t>(stream_handle())));
  stream_synchronize("copy");
}

void backend_fill_bytes(const TensorView& device, int byte) {
  LATHE_CUDA_CHECK("fill", cudaMemsetAsync(device.data, byte, device.numel() * dtype_size(device.dtype),
                                           static_cast<cudaStream_t>(stream_handle())));
}

Tensor backend_pinned_empty(const Shape& shape, DType dtype) {
  require_available("pinned host tensor");
  TensorView view;
  view.shape = shape;
  view.strides = contiguous_strides(shape);
  view.dtype = dtype;
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  LATHE_CUDA_CHECK("pinned host tensor", cudaMallocHost(&view.data, bytes));
  return Tensor::adopt(std::shared_ptr<void>(view.data, [](void* pointer) { cudaFreeHost(pointer); }), view);
}

DeviceMemoryStats backend_memory_stats() { return available() ? allocator().stats() : DeviceMemoryStats{}; }

void backend_empty_cache() {
  if (available()) allocator().empty_cache();
}

void backend_reset_memory_peak() {
  if (available()) allocator().reset_peak();
}

#else  // no CUDA backend in this build: every entry is the one clear error

Tensor backend_empty(const Shape&, DType, const std::string&) {
  require_available("device tensor");
  return {};
}
void backend_copy_rows(const TensorView&, const RowLayout&, const TensorView&, const RowLayout&) {
  require_available("device copy");
}
void backend_fill_bytes(const TensorView&, int) { require_available("device fill"); }
Tensor backend_pinned_empty(const Shape&, DType) {
  require_available("pinned host tensor");
  return {};
}
DeviceMemoryStats backend_memory_stats() { return {}; }
void backend_empty_cache() {}
void backend_reset_memory_peak() {}

#endif

// Host copies (host to host, and every copy of the host simulation of tests, cuda_runtime.h) and
// the simulation's allocation: host memory tagged as the device's.
namespace {

void host_copy_rows(const TensorView& destination, const RowLayout& to, const TensorView& source,
                    const RowLayout& from) {
  const int64_t element = static_cast<int64_t>(dtype_size(source.dtype));
  const auto* in = static_cast<const char*>(source.data);
  auto* out = static_cast<char*>(destination.data);
  for (int64_t row = 0; row < from.rows; ++row)
    std::memmove(out + row * to.pitch * element, in + row * from.pitch * element,
                 static_cast<size_t>(from.cols * element));
}

}  // namespace

Tensor device_empty(const Shape& shape, DType dtype, const std::string& what) {
  return host_simulation_active() ? simulated_device_empty(shape, dtype) : backend_empty(shape, dtype, what);
}

Tensor device_zeros(const Shape& shape, DType dtype, const std::string& what) {
  Tensor tensor = device_empty(shape, dtype, what);
  fill_bytes(tensor, 0);
  return tensor;
}

void copy(const TensorView& destination, const TensorView& source) {
  LATHE_CHECK(destination.shape == source.shape && destination.dtype == source.dtype, "copy from ", source.describe(),
              " to ", destination.describe(), ": shapes and dtypes must match");
  if (source.numel() == 0) return;
  const std::optional<RowLayout> from = row_layout(source);
  if (!from) {
    LATHE_CHECK(source.device == Device::cpu, "copy from ", source.describe(),
                ": this layout is not supported on the device");
    const Tensor contiguous = convert(source, source.dtype);
    copy(destination, contiguous);
    return;
  }
  const std::optional<RowLayout> to = row_layout(destination);
  LATHE_CHECK(to.has_value(), "copy to ", destination.describe(),
              ": this layout is not supported (the last axis must be contiguous, leading axes evenly spaced)");
  if (host_simulation_active() || (destination.device == Device::cpu && source.device == Device::cpu)) {
    SimulatedDeviceAccess access;
    access.open(destination), access.open(source);
    host_copy_rows(destination, *to, source, *from);
  } else
    backend_copy_rows(destination, *to, source, *from);
}

Tensor to_device(const TensorView& host) {
  Tensor device = device_empty(host.shape, host.dtype, "copy of a host tensor");
  copy(device, host);
  return device;
}

Tensor to_host(const TensorView& device) {
  Tensor host = Tensor::empty(device.shape, device.dtype);
  copy(host, device);
  return host;
}

void fill_bytes(const TensorView& device, int byte) {
  LATHE_CHECK(device.device == Device::cuda && device.is_contiguous(), "fill_bytes: ", device.describe(),
              " must be a contiguous device tensor");
  if (!host_simulation_active()) return backend_fill_bytes(device, byte);
  SimulatedDeviceAccess access;
  access.open(device);
  std::memset(device.data, byte, static_cast<size_t>(device.numel()) * dtype_size(device.dtype));
}

Tensor pinned_empty(const Shape& shape, DType dtype) {
  return host_simulation_active() ? Tensor::empty(shape, dtype) : backend_pinned_empty(shape, dtype);
}

DeviceMemoryStats memory_stats() { return backend_memory_stats(); }
void empty_cache() { backend_empty_cache(); }
void reset_memory_peak() { backend_reset_memory_peak(); }

}  // namespace lathe::cuda

namespace lathe {

Tensor empty_on(Device device, const Shape& shape, DType dtype, const std::string& what) {
  return device == Device::cpu ? Tensor::empty(shape, dtype) : cuda::device_empty(shape, dtype, what);
}

Tensor zeros_on(Device device, const Shape& shape, DType dtype, const std::string& what) {
  return device == Device::cpu ? Tensor::zeros(shape, dtype) : cuda::device_zeros(shape, dtype, what);
}

Tensor copy_on_same_device(const TensorView& view) {
  if (view.device == Device::cpu) return convert(view, view.dtype);
  Tensor copy = cuda::device_empty(view.shape, view.dtype, "copy of a device tensor");
  cuda::copy(copy, view);
  return copy;
}

Tensor on_host(const Tensor& tensor) { return tensor.view().device == Device::cpu ? tensor : cuda::to_host(tensor); }

Tensor on_device(Device device, const Tensor& host) { return device == Device::cpu ? host : cuda::to_device(host); }

double scalar_value(const Tensor& tensor) {
  const Tensor host = on_host(tensor);
  return read_element(host, 0);
}

}  // namespace lathe
