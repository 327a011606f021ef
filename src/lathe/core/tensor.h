// Tensors: an owning Tensor (64-byte aligned, reference-counted storage) and a non-owning
// TensorView (pointer, shape, strides in elements, dtype, device). Ops take views; views of a
// tensor (slice, select, transpose, reshape of contiguous data) never copy. A tensor lives on the
// host (Device::cpu, allocated here) or on a GPU (Device::cuda, allocated by device/; only device
// code may read its elements: the element helpers below refuse it).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/dtype.h"
#include "lathe/core/error.h"

namespace lathe {

constexpr int kMaxRank = 6;

// Where a tensor's elements live.
enum class Device : uint8_t { cpu, cuda };
const char* device_name(Device device);  // "cpu", "cuda"

// A small fixed-capacity list of extents (or strides).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[axis]; }
  int64_t& operator[](int axis) { return dims_[axis]; }
  int64_t numel() const;
  void push_back(int64_t dim);
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string to_string() const;  // "(2, 3, 4)"

 private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

struct TensorView {
  void* data = nullptr;
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;
  Device device = Device::cpu;

  int rank() const { return shape.rank(); }
  // Extent of an axis; negative axes count from the end.
  int64_t dim(int axis) const { return shape[normalize_axis(axis)]; }
  int64_t stride(int axis) const { return strides[normalize_axis(axis)]; }
  int64_t numel() const { return shape.numel(); }
  bool is_contiguous() const;
  int normalize_axis(int axis) const;

  template <class T>
  T* ptr() const {
    LATHE_ASSERT(dtype_of<T>() == dtype);
    return static_cast<T*>(data);
  }

  TensorView select(int axis, int64_t index) const;                 // drops the axis
  TensorView slice(int axis, int64_t begin, int64_t end) const;      // keeps the axis
  TensorView transpose(int axis_a, int axis_b) const;
  TensorView reshape(const Shape& new_shape) const;                 // contiguous views only
  std::string describe() const;                                     // "f32(2, 3)", "cuda:f32(2, 3)"
};

// Row-major strides of a shape.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype);

  // Views of a temporary Tensor would dangle the moment the statement ends, so taking one from an
  // rvalue is a compile error: `args.y = Tensor::empty(...)` does not build; name the tensor first.
  const TensorView& view() const& { return view_; }
  const TensorView& view() const&& = delete;
  operator const TensorView&() const& { return view_; }
  operator const TensorView&() const&& = delete;
  const Shape& shape() const { return view_.shape; }
  DType dtype() const { return view_.dtype; }
  int64_t numel() const { return view_.numel(); }
  int64_t dim(int axis) const { return view_.dim(axis); }
  template <class T>
  T* ptr() const { return view_.ptr<T>(); }
  bool defined() const { return storage_ != nullptr; }
  // A tensor sharing this one's storage with another shape (contiguous tensors only).
  Tensor reshape(const Shape& new_shape) const;
  // A tensor sharing this one's storage that views part of it (e.g. a slice), kept alive by it.
  Tensor share_view(const TensorView& part) const;
  // A tensor over memory allocated elsewhere (device memory, pinned host memory): `storage` owns
  // it (its deleter frees it) and `view` describes it. Not counted by tensor_bytes_in_use().
  static Tensor adopt(std::shared_ptr<void> storage, const TensorView& view);

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

// Bytes of tensor storage currently allocated in this process, and the high-water mark since
// the last reset: the memory accounting of training steps.
int64_t tensor_bytes_in_use();
int64_t tensor_bytes_peak();
void reset_tensor_bytes_peak();

// Element access for references, tests and tools (slow, by value, any dtype).
double read_element(const TensorView& view, int64_t flat_index);  // flat row-major index
void write_element(const TensorView& view, int64_t flat_index, double value);
// Copies a tensor's elements (any layout, any dtype) into a row-major vector of T.
template <class T>
std::vector<T> to_vector(const TensorView& view);
// Writes row-major values into a tensor of any layout and dtype, rounding to its dtype.
template <class T>
void write_from_vector(const TensorView& view, const std::vector<T>& values);
// A new contiguous tensor of the given dtype holding view's values (rounded to nearest-even).
// Contiguous f32 <-> bf16 takes a vectorised, threaded path; other pairs go element by element.
Tensor convert(const TensorView& view, DType dtype);
// Fills every element with a quiet NaN (floating dtypes) or a sentinel (integer dtypes), so
// a kernel that forgets to write an element is caught by comparison.
void poison(const TensorView& view);
void fill_value(const TensorView& view, double value);

}  // namespace lathe
