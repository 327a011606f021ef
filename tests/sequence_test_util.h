// Helpers of the sequence-op tests (gated_delta_rule, ssd_scan, short_conv): seeded random
// tensors, copies of a token range of a (B, T, ...) tensor, relative norms, sums of products for
// finite-difference losses, and running a function at a given thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/core/tensor.h"

namespace lathe {

inline Tensor random_tensor_for_test(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream, double low,
                                     double high) {
  Tensor tensor = Tensor::empty(shape, dtype);
  fill_uniform(tensor, seed, low, high, stream);
  return tensor;
}

// A contiguous copy of tokens [begin, end) (axis 1) of a (B, T, ...) tensor.
inline Tensor token_range(const Tensor& tensor, int64_t begin, int64_t end) {
  const TensorView view = tensor.view().slice(1, begin, end);
  Tensor copy = Tensor::empty(view.shape, view.dtype);
  write_from_vector(copy, to_vector<double>(view));
  return copy;
}

// Writes `part` into tokens [begin, begin + part's T) of `whole`.
inline void write_token_range(const Tensor& whole, int64_t begin, const Tensor& part) {
  const TensorView view = whole.view().slice(1, begin, begin + part.shape()[1]);
  write_from_vector(view, to_vector<double>(part));
}

inline Tensor copy_tensor(const Tensor& tensor) {
  Tensor copy = Tensor::empty(tensor.shape(), tensor.dtype());
  write_from_vector(copy, to_vector<double>(tensor));
  return copy;
}

inline double relative_norm_difference(const TensorView& out, const TensorView& ref) {
  const std::vector<double> a = to_vector<double>(out), b = to_vector<double>(ref);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (a[i] - b[i]) * (a[i] - b[i]), norm += b[i] * b[i];
  return std::sqrt(diff / std::max(norm, 1e-300));  // NaN stays NaN: fails every <= check
}

// sum(a * b) over two same-shaped tensors: the scalar loss of finite-difference checks.
inline double sum_of_products(const TensorView& a, const TensorView& b) {
  const std::vector<double> x = to_vector<double>(a), y = to_vector<double>(b);
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += x[i] * y[i];
  return sum;
}

// The values of several tensors, one after the other (for bitwise comparisons of whole runs).
inline std::vector<double> concatenated(std::initializer_list<const Tensor*> tensors) {
  std::vector<double> all;
  for (const Tensor* tensor : tensors) {
    const std::vector<double> values = to_vector<double>(*tensor);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

inline std::vector<double> run_with_threads(int threads, const std::function<std::vector<double>()>& run) {
  const int saved = num_threads();
  set_num_threads(threads);
  std::vector<double> result = run();
  set_num_threads(saved);
  return result;
}

}  // namespace lathe
