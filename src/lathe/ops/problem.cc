#include "lathe/ops/problem.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "lathe/device/device_tensor.h"

namespace lathe {

static std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  size_t end = text.find_last_not_of(" \t");
  return begin == std::string::npos ? std::string() : text.substr(begin, end - begin + 1);
}

ShapeSpec ShapeSpec::parse(const std::string& text) {
  ShapeSpec spec;
  spec.text_ = text;
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), ' ', ',');
  std::stringstream stream(normalized);
  std::string item;
  while (std::getline(stream, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    size_t equals = item.find('=');
    LATHE_CHECK(equals != std::string::npos && equals > 0 && equals + 1 < item.size(), "malformed shape item '", item,
                "' in '", text, "' (expected key=value, e.g. m=1024,n=1024)");
    std::string key = item.substr(0, equals);
    LATHE_CHECK(!spec.values_.count(key), "shape key '", key, "' given twice in '", text, "'");
    spec.values_[key] = item.substr(equals + 1);
  }
  return spec;
}

int64_t ShapeSpec::get_int(const std::string& key, int64_t fallback) const {
  auto found = values_.find(key);
  if (found == values_.end()) return fallback;
  size_t parsed = 0;
  int64_t value = 0;
  try {
    value = std::stoll(found->second, &parsed);
  } catch (const std::exception&) {
    parsed = 0;
  }
  LATHE_CHECK(parsed == found->second.size(), "shape value '", found->second, "' for '", key, "' is not an integer");
  LATHE_CHECK(value >= 0, "shape value for '", key, "' must not be negative, got ", value);
  return value;
}

double ShapeSpec::get_double(const std::string& key, double fallback) const {
  auto found = values_.find(key);
  if (found == values_.end()) return fallback;
  size_t parsed = 0;
  double value = 0;
  try {
    value = std::stod(found->second, &parsed);
  } catch (const std::exception&) {
    parsed = 0;
  }
  LATHE_CHECK(parsed == found->second.size(), "shape value '", found->second, "' for '", key, "' is not a number");
  return value;
}

std::string ShapeSpec::get(const std::string& key, const std::string& fallback) const {
  auto found = values_.find(key);
  return found == values_.end() ? fallback : found->second;
}

void ShapeSpec::check_known(const std::string& op, const std::vector<std::string>& known) const {
  for (const auto& [key, value] : values_) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
    throw_error(op, ": unknown shape key '", key, "' (known: ", list, ")");
  }
}

std::string CheckResult::summary() const {
  std::ostringstream out;
  for (const auto& output : outputs) {
    out << output.name << ": " << (output.passed ? "ok" : "FAIL") << " max_error=" << output.max_error
        << " naive_error=" << output.naive_error << " allowed=" << output.allowed;
    if (output.allowed_relative_norm > 0)
      out << " rel_norm=" << output.relative_norm << " allowed_rel_norm=" << output.allowed_relative_norm;
    if (output.nan_count) out << " nan=" << output.nan_count;
    if (output.worst_index >= 0) out << " worst_index=" << output.worst_index;
    out << "\n";
  }
  return out.str();
}

// Elements from a view's first element to its last (strides >= 0), and that span as a 1-D view.
static int64_t span_elements(const TensorView& view) {
  if (view.numel() == 0) return 0;
  int64_t span = 1;
  for (int axis = 0; axis < view.rank(); ++axis) {
    LATHE_CHECK(view.stride(axis) >= 0, "mirror of ", view.describe(), ": negative strides are not supported");
    span += (view.dim(axis) - 1) * view.stride(axis);
  }
  return span;
}

static TensorView span_view(const TensorView& view, void* data, Device device) {
  TensorView span;
  span.data = data;
  span.shape = Shape{span_elements(view)};
  span.strides = Shape{1};
  span.dtype = view.dtype;
  span.device = device;
  return span;
}

DeviceMirror mirror_to_device(const TensorView& host) {
  const TensorView host_span = span_view(host, host.data, Device::cpu);
  DeviceMirror mirror;
  mirror.before.resize(static_cast<size_t>(host_span.numel()) * dtype_size(host.dtype));
  if (!mirror.before.empty()) std::memcpy(mirror.before.data(), host.data, mirror.before.size());
  Tensor span = cuda::device_empty(Shape{host_span.numel()}, host.dtype, "mirror of a problem tensor");
  cuda::copy(span, host_span);
  TensorView mirrored = host;
  mirrored.data = span.view().data;
  mirrored.device = Device::cuda;
  mirror.device = span.share_view(mirrored);
  return mirror;
}

void copy_from_device(const TensorView& host, const DeviceMirror& mirror) {
  const Tensor result = cuda::to_host(span_view(host, mirror.device.view().data, Device::cuda));
  const size_t element = dtype_size(host.dtype);
  const auto* after = static_cast<const uint8_t*>(result.view().data);
  auto* out = static_cast<uint8_t*>(host.data);
  for (size_t offset = 0; offset < mirror.before.size(); offset += element)
    if (std::memcmp(after + offset, mirror.before.data() + offset, element) != 0)
      std::memcpy(out + offset, after + offset, element);
}

OutputCheck compare_output(const std::string& name, const TensorView& fast, const TensorView& reference64,
                           const TensorView& naive, const Tolerance& tolerance) {
  OutputCheck check;
  check.name = name;
  std::vector<double> fast_values = to_vector<double>(fast);
  std::vector<double> exact = to_vector<double>(reference64);
  std::vector<double> naive_values = to_vector<double>(naive);
  double scale = 0, diff_norm = 0, ref_norm = 0, naive_diff_norm = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    double expected = exact[i], got = fast_values[i];
    if (std::isfinite(expected)) scale = std::max(scale, std::fabs(expected));
    if (std::isnan(got) && !std::isnan(expected)) {
      ++check.nan_count;
      continue;
    }
    double error = (got == expected) ? 0.0 : std::fabs(got - expected);
    if (std::isnan(error)) error = std::isnan(got) && std::isnan(expected) ? 0.0 : INFINITY;
    if (error > check.max_error) {
      check.max_error = error;
      check.worst_index = static_cast<int64_t>(i);
    }
    double naive_error = (naive_values[i] == expected) ? 0.0 : std::fabs(naive_values[i] - expected);
    if (std::isfinite(naive_error)) check.naive_error = std::max(check.naive_error, naive_error);
    if (std::isfinite(expected) && std::isfinite(got)) {
      diff_norm += (got - expected) * (got - expected);
      ref_norm += expected * expected;
      if (std::isfinite(naive_error)) naive_diff_norm += naive_error * naive_error;
    }
  }
  check.allowed = tolerance.naive_factor * check.naive_error + tolerance.absolute * std::max(1.0, scale);
  check.passed = check.nan_count == 0 && check.max_error <= check.allowed;
  if (fast.dtype == DType::f32 && tolerance.relative_norm > 0 && ref_norm > 0) {
    check.relative_norm = std::sqrt(diff_norm / ref_norm);
    // The same absolute floor as the max-error rule, as a norm over all elements: where the exact
    // result is ~0 by cancellation (e.g. RMSNorm's dx at dim 1), a relative bound means nothing.
    double absolute_floor =
        tolerance.absolute * std::max(1.0, scale) * std::sqrt(static_cast<double>(exact.size()) / ref_norm);
    check.allowed_relative_norm =
        std::max(tolerance.relative_norm, tolerance.naive_factor * std::sqrt(naive_diff_norm / ref_norm)) +
        absolute_floor;
    check.passed = check.passed && check.relative_norm <= check.allowed_relative_norm;
  }
  return check;
}

ReferenceOutputs compute_reference_outputs(Problem& problem) {
  ReferenceOutputs references;
  std::vector<TensorView> into_exact, into_naive;
  for (const auto& output : problem.outputs()) {
    references.exact.push_back(Tensor::empty(output.second.shape, DType::f64));
    references.naive.push_back(Tensor::empty(output.second.shape, output.second.dtype));
    into_exact.push_back(references.exact.back().view());
    into_naive.push_back(references.naive.back().view());
  }
  problem.prepare_run();
  problem.reference(true, into_exact);
  problem.prepare_run();
  const auto start = std::chrono::steady_clock::now();
  problem.reference(false, into_naive);
  references.naive_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return references;
}

CheckResult check_run(Problem& problem, const ReferenceOutputs& references, const std::function<void()>& run) {
  for (const auto& output : problem.outputs()) poison(output.second);
  problem.prepare_run();  // after poisoning: outputs updated in place are also inputs
  run();
  CheckResult result;
  auto fast = problem.outputs();
  LATHE_ASSERT(fast.size() == references.exact.size());
  for (size_t i = 0; i < fast.size(); ++i) {
    result.outputs.push_back(compare_output(fast[i].first, fast[i].second, references.exact[i].view(),
                                            references.naive[i].view(), problem.tolerance(fast[i].first)));
    result.passed = result.passed && result.outputs.back().passed;
  }
  return result;
}

int64_t random_extent(uint64_t seed, uint64_t stream, int64_t low, int64_t high) {
  double u = uniform_at(seed, 0x5eed0000u + stream, 0);
  return low + static_cast<int64_t>(u * static_cast<double>(high - low + 1));
}

const OpRegistration& find_op(const std::string& name) {
  std::string known;
  for (const auto& op : all_ops()) {
    if (op.name == name) return op;
    known += (known.empty() ? "" : ", ") + op.name;
  }
  throw_error("unknown op '", name, "' (known: ", known, ")");
}

}  // namespace lathe
