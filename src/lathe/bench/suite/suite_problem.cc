#include "lathe/bench/suite/suite_problem.h"

#include "lathe/core/rng.h"

namespace lathe {

SuiteProblem::SuiteProblem(SuiteInfo info, std::string shape_text)
    : info_(std::move(info)), shape_text_(std::move(shape_text)) {}

size_t SuiteProblem::add_input(const std::string& name, const Shape& shape, DType dtype, double low, double high) {
  input_specs_.push_back({name, shape, dtype, low, high});
  inputs_.push_back(Tensor::empty(shape, dtype));
  return inputs_.size() - 1;
}

size_t SuiteProblem::add_output(const std::string& name, const Shape& shape, DType dtype) {
  output_specs_.push_back({name, shape, dtype, 0, 0});
  outputs_.push_back(Tensor::empty(shape, dtype));
  return outputs_.size() - 1;
}

void SuiteProblem::allocate_inputs() {
  inputs_.clear();
  for (const auto& spec : input_specs_) inputs_.push_back(Tensor::empty(spec.shape, spec.dtype));
}

void SuiteProblem::allocate_outputs() {
  outputs_.clear();
  for (const auto& spec : output_specs_) outputs_.push_back(Tensor::empty(spec.shape, spec.dtype));
}

int64_t SuiteProblem::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& tensor : inputs_) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  for (const auto& tensor : outputs_) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  return bytes;
}

double SuiteProblem::io_bytes() const { return static_cast<double>(buffer_bytes()); }

void SuiteProblem::fill_inputs(uint64_t seed) {
  for (size_t i = 0; i < inputs_.size(); ++i)
    fill_uniform(inputs_[i].view(), seed, input_specs_[i].low, input_specs_[i].high, i + 1);
}

}  // namespace lathe
