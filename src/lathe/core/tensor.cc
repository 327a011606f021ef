#include "lathe/core/tensor.h"

#include <atomic>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "lathe/core/bf16_convert.h"
#include "lathe/core/half.h"
#include "lathe/core/host_block_cache.h"
#include "lathe/core/parallel.h"

namespace lathe {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t dim : dims) push_back(dim);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  for (int64_t dim : dims) push_back(dim);
}

int64_t Shape::numel() const {
  int64_t count = 1;
  for (int axis = 0; axis < rank_; ++axis) count *= dims_[axis];
  return count;
}

void Shape::push_back(int64_t dim) {
  LATHE_CHECK(rank_ < kMaxRank, "tensor rank above the maximum of ", kMaxRank);
  dims_[rank_++] = dim;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int axis = 0; axis < rank_; ++axis)
    if (dims_[axis] != other.dims_[axis]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string text = "(";
  for (int axis = 0; axis < rank_; ++axis) {
    if (axis) text += ", ";
    text += std::to_string(dims_[axis]);
  }
  return text + ")";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  int64_t stride = 1;
  for (int axis = shape.rank() - 1; axis >= 0; --axis) {
    strides[axis] = stride;
    stride *= shape[axis];
  }
  return strides;
}

int TensorView::normalize_axis(int axis) const {
  int normalized = axis < 0 ? axis + rank() : axis;
  LATHE_CHECK(normalized >= 0 && normalized < rank(), "axis ", axis, " out of range for tensor ", describe());
  return normalized;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int axis = rank() - 1; axis >= 0; --axis) {
    if (shape[axis] != 1 && strides[axis] != expected) return false;
    expected *= shape[axis];
  }
  return true;
}

static TensorView drop_axis(const TensorView& view, int axis) {
  TensorView result = view;
  result.shape = Shape();
  result.strides = Shape();
  for (int i = 0; i < view.rank(); ++i) {
    if (i == axis) continue;
    result.shape.push_back(view.shape[i]);
    result.strides.push_back(view.strides[i]);
  }
  return result;
}

TensorView TensorView::select(int axis, int64_t index) const {
  axis = normalize_axis(axis);
  LATHE_CHECK(index >= 0 && index < shape[axis], "index ", index, " out of range for axis ", axis, " of ", describe());
  TensorView result = drop_axis(*this, axis);
  result.data = static_cast<char*>(data) + index * strides[axis] * dtype_size(dtype);
  return result;
}

TensorView TensorView::slice(int axis, int64_t begin, int64_t end) const {
  axis = normalize_axis(axis);
  LATHE_CHECK(0 <= begin && begin <= end && end <= shape[axis], "slice [", begin, ", ", end, ") out of range for axis ",
              axis, " of ", describe());
  TensorView result = *this;
  result.shape[axis] = end - begin;
  result.data = static_cast<char*>(data) + begin * strides[axis] * dtype_size(dtype);
  return result;
}

TensorView TensorView::transpose(int axis_a, int axis_b) const {
  axis_a = normalize_axis(axis_a);
  axis_b = normalize_axis(axis_b);
  TensorView result = *this;
  std::swap(result.shape[axis_a], result.shape[axis_b]);
  std::swap(result.strides[axis_a], result.strides[axis_b]);
  return result;
}

TensorView TensorView::reshape(const Shape& new_shape) const {
  LATHE_CHECK(is_contiguous(), "reshape of non-contiguous tensor ", describe());
  LATHE_CHECK(new_shape.numel() == numel(), "cannot reshape ", describe(), " to ", new_shape.to_string());
  TensorView result = *this;
  result.shape = new_shape;
  result.strides = contiguous_strides(new_shape);
  return result;
}

std::string TensorView::describe() const {
  return std::string(device == Device::cpu ? "" : "cuda:") + dtype_name(dtype) + shape.to_string();
}

const char* device_name(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }

namespace {
std::atomic<int64_t> g_bytes_in_use{0};
std::atomic<int64_t> g_bytes_peak{0};
}  // namespace

int64_t tensor_bytes_in_use() { return g_bytes_in_use.load(std::memory_order_relaxed); }
int64_t tensor_bytes_peak() { return g_bytes_peak.load(std::memory_order_relaxed); }
void reset_tensor_bytes_peak() { g_bytes_peak.store(tensor_bytes_in_use(), std::memory_order_relaxed); }

Tensor Tensor::reshape(const Shape& new_shape) const {
  Tensor result = *this;
  result.view_ = view_.reshape(new_shape);
  return result;
}

Tensor Tensor::share_view(const TensorView& part) const {
  Tensor result = *this;
  result.view_ = part;
  return result;
}

Tensor Tensor::adopt(std::shared_ptr<void> storage, const TensorView& view) {
  Tensor tensor;
  tensor.storage_ = std::move(storage);
  tensor.view_ = view;
  return tensor;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int axis = 0; axis < shape.rank(); ++axis)
    LATHE_CHECK(shape[axis] >= 0, "negative extent in tensor shape ", shape.to_string());
  Tensor tensor;
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* memory = acquire_host_block(rounded);
  LATHE_CHECK(memory != nullptr, "out of memory allocating ", bytes, " bytes for tensor ", shape.to_string());
  const int64_t accounted = static_cast<int64_t>(rounded);
  const int64_t in_use = g_bytes_in_use.fetch_add(accounted, std::memory_order_relaxed) + accounted;
  int64_t peak = g_bytes_peak.load(std::memory_order_relaxed);
  while (in_use > peak && !g_bytes_peak.compare_exchange_weak(peak, in_use, std::memory_order_relaxed)) {
  }
  tensor.storage_ = std::shared_ptr<void>(memory, [accounted](void* pointer) {
    g_bytes_in_use.fetch_sub(accounted, std::memory_order_relaxed);
    release_host_block(pointer, static_cast<size_t>(accounted));
  });
  tensor.view_.data = memory;
  tensor.view_.shape = shape;
  tensor.view_.strides = contiguous_strides(shape);
  tensor.view_.dtype = dtype;
  return tensor;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor tensor = empty(shape, dtype);
  fill_value(tensor, 0.0);
  return tensor;
}

// Calls fn(flat_index, element_pointer) for every element in row-major order.
template <class Fn>
static void for_each_element(const TensorView& view, Fn&& fn) {
  LATHE_CHECK(view.device == Device::cpu, "element access to ", view.describe(),
              " on the host: copy it to the host first (device/device_tensor.h)");
  int64_t count = view.numel();
  if (count == 0) return;
  int rank = view.rank();
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;
  int element_size = dtype_size(view.dtype);
  for (int64_t flat = 0; flat < count; ++flat) {
    fn(flat, static_cast<char*>(view.data) + offset * element_size);
    for (int axis = rank - 1; axis >= 0; --axis) {
      if (++index[axis] < view.shape[axis]) {
        offset += view.strides[axis];
        break;
      }
      offset -= (view.shape[axis] - 1) * view.strides[axis];
      index[axis] = 0;
    }
  }
}

static double load_as_double(const void* element, DType dtype) {
  switch (dtype) {
    case DType::f64: return *static_cast<const double*>(element);
    case DType::f32: return *static_cast<const float*>(element);
    case DType::bf16: return bf16_to_float(*static_cast<const bf16*>(element));
    case DType::f16: return f16_to_float(*static_cast<const f16*>(element));
    case DType::i64: return static_cast<double>(*static_cast<const int64_t*>(element));
    case DType::i32: return *static_cast<const int32_t*>(element);
    case DType::u16: return *static_cast<const uint16_t*>(element);
    case DType::u8: return *static_cast<const uint8_t*>(element);
    case DType::i16: return *static_cast<const int16_t*>(element);
    case DType::i8: return *static_cast<const int8_t*>(element);
    case DType::boolean: return *static_cast<const uint8_t*>(element) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

static void store_from_double(void* element, DType dtype, double value) {
  switch (dtype) {
    case DType::f64: *static_cast<double*>(element) = value; break;
    case DType::f32: *static_cast<float*>(element) = static_cast<float>(value); break;
    case DType::bf16: *static_cast<bf16*>(element) = float_to_bf16(static_cast<float>(value)); break;
    case DType::f16: *static_cast<f16*>(element) = float_to_f16(static_cast<float>(value)); break;
    case DType::i64: *static_cast<int64_t*>(element) = static_cast<int64_t>(value); break;
    case DType::i32: *static_cast<int32_t*>(element) = static_cast<int32_t>(value); break;
    case DType::u16: *static_cast<uint16_t*>(element) = static_cast<uint16_t>(value); break;
    case DType::u8: *static_cast<uint8_t*>(element) = static_cast<uint8_t>(value); break;
    case DType::i16: *static_cast<int16_t*>(element) = static_cast<int16_t>(value); break;
    case DType::i8: *static_cast<int8_t*>(element) = static_cast<int8_t>(value); break;
    case DType::boolean: *static_cast<uint8_t*>(element) = value != 0 ? 1 : 0; break;
  }
}

static int64_t element_offset(const TensorView& view, int64_t flat_index) {
  LATHE_CHECK(view.device == Device::cpu, "element access to ", view.describe(),
              " on the host: copy it to the host first (device/device_tensor.h)");
  int64_t offset = 0;
  for (int axis = view.rank() - 1; axis >= 0; --axis) {
    offset += (flat_index % view.shape[axis]) * view.strides[axis];
    flat_index /= view.shape[axis];
  }
  return offset;
}

double read_element(const TensorView& view, int64_t flat_index) {
  return load_as_double(static_cast<const char*>(view.data) + element_offset(view, flat_index) * dtype_size(view.dtype),
                        view.dtype);
}

void write_element(const TensorView& view, int64_t flat_index, double value) {
  store_from_double(static_cast<char*>(view.data) + element_offset(view, flat_index) * dtype_size(view.dtype),
                    view.dtype, value);
}

template <class T>
std::vector<T> to_vector(const TensorView& view) {
  std::vector<T> values(static_cast<size_t>(view.numel()));
  for_each_element(view, [&](int64_t flat, const void* element) {
    values[flat] = static_cast<T>(load_as_double(element, view.dtype));
  });
  return values;
}

template <class T>
void write_from_vector(const TensorView& view, const std::vector<T>& values) {
  LATHE_ASSERT(static_cast<int64_t>(values.size()) == view.numel());
  for_each_element(view, [&](int64_t flat, void* element) {
    store_from_double(element, view.dtype, static_cast<double>(values[flat]));
  });
}

template std::vector<double> to_vector<double>(const TensorView&);
template std::vector<float> to_vector<float>(const TensorView&);
template std::vector<int64_t> to_vector<int64_t>(const TensorView&);
template void write_from_vector<double>(const TensorView&, const std::vector<double>&);
template void write_from_vector<float>(const TensorView&, const std::vector<float>&);

Tensor convert(const TensorView& view, DType dtype) {
  Tensor result = Tensor::empty(view.shape, dtype);
  const bool contiguous_cpu = view.is_contiguous() && view.device == Device::cpu;
  if (dtype == view.dtype && contiguous_cpu) {  // a copy: no round trip
    if (view.numel() > 0)
      std::memcpy(result.view().data, view.data, static_cast<size_t>(view.numel()) * dtype_size(dtype));
    return result;
  }
  if (contiguous_cpu && view.dtype == DType::f32 && dtype == DType::bf16) {
    convert_f32_to_bf16(static_cast<const float*>(view.data), static_cast<bf16*>(result.view().data),
                        view.numel());
    return result;
  }
  if (contiguous_cpu && view.dtype == DType::bf16 && dtype == DType::f32) {
    convert_bf16_to_f32(static_cast<const bf16*>(view.data), static_cast<float*>(result.view().data), view.numel());
    return result;
  }
  write_from_vector(result, to_vector<double>(view));
  return result;
}

void poison(const TensorView& view) {
  double sentinel = is_floating(view.dtype) ? std::numeric_limits<double>::quiet_NaN() : 0x5a;
  fill_value(view, sentinel);
}

void fill_value(const TensorView& view, double value) {
  LATHE_CHECK(view.device == Device::cpu, "fill of ", view.describe(),
              " on the host: device tensors are filled by device/device_tensor.h");
  if (value == 0.0 && !std::signbit(value) && view.is_contiguous()) {  // +0.0 is all-zero bits in every dtype: one memset
    if (view.numel() > 0) std::memset(view.data, 0, static_cast<size_t>(view.numel()) * dtype_size(view.dtype));
    return;
  }
  for_each_element(view, [&](int64_t, void* element) { store_from_double(element, view.dtype, value); });
}

}  // namespace lathe
