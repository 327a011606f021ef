#include "lathe/ops/short_conv/short_conv.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/short_conv/short_conv_cuda.h"
#include "lathe/ops/short_conv/short_conv_cuda_body.h"
#include "lathe/ops/tensor_bytes.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(short_conv_forward_kernel, ShortConvArgs, ShortConvCpuConfig)
LATHE_DECLARE_ISA_KERNEL(short_conv_backward_kernel, ShortConvBackwardArgs, ShortConvCpuConfig)

namespace {

bool present(const TensorView& view) { return view.data != nullptr; }

void check_f32(ArgChecker& check, const char* name, const TensorView& view, std::initializer_list<int64_t> shape) {
  check.present(name, view).shape(name, view, shape).dtype(name, view, DType::f32).contiguous(name, view);
}

// Checks the inputs; returns {batch, seq, channels, kernel}.
std::array<int64_t, 4> check_inputs(ArgChecker& check, const TensorView& x, const TensorView& weight,
                                    const TensorView& bias, const TensorView& initial_state) {
  check.present("x", x).rank("x", x, 3).dtype("x", x, DType::f32).contiguous("x", x);
  check.present("weight", weight).rank("weight", weight, 2);
  const int64_t batch = x.dim(0), seq = x.dim(1), channels = x.dim(2), kernel = weight.dim(1);
  check_f32(check, "weight", weight, {channels, kernel});
  check.require(kernel >= 1, "weight has kernel size ", kernel, ", expected >= 1");
  if (present(bias)) check_f32(check, "bias", bias, {channels});
  if (present(initial_state)) check_f32(check, "initial_state", initial_state, {batch, kernel - 1, channels});
  return {batch, seq, channels, kernel};
}

}  // namespace

void validate(const ShortConvArgs& args) {
  ArgChecker check("short_conv");
  const auto [batch, seq, channels, kernel] = check_inputs(check, args.x, args.weight, args.bias, args.initial_state);
  check_f32(check, "y", args.y, {batch, seq, channels});
  if (present(args.final_state)) check_f32(check, "final_state", args.final_state, {batch, kernel - 1, channels});
}

void validate(const ShortConvBackwardArgs& args) {
  ArgChecker check("short_conv_backward");
  const auto [batch, seq, channels, kernel] = check_inputs(check, args.x, args.weight, args.bias, args.initial_state);
  check_f32(check, "dy", args.dy, {batch, seq, channels});
  if (present(args.d_final_state)) check_f32(check, "d_final_state", args.d_final_state, {batch, kernel - 1, channels});
  check_f32(check, "dx", args.dx, {batch, seq, channels});
  check_f32(check, "dweight", args.dweight, {channels, kernel});
  check.require(present(args.dbias) == present(args.bias), "dbias must be given exactly when bias is");
  if (present(args.dbias)) check_f32(check, "dbias", args.dbias, {channels});
  check.require(present(args.d_initial_state) == present(args.initial_state),
                "d_initial_state must be given exactly when initial_state is");
  if (present(args.d_initial_state))
    check_f32(check, "d_initial_state", args.d_initial_state, {batch, kernel - 1, channels});
}

namespace {

// x~ of one batch: (K - 1 + T, C), the state rows then x. Pointer arithmetic on data() here and
// below, not &v[i]: at seq 0 or kernel 1 the index is the end of an empty range.
template <class T>
std::vector<T> extended_input(const std::vector<T>& x, const std::vector<T>& state, int64_t b, int64_t seq,
                              int64_t channels, int64_t kernel) {
  std::vector<T> xe((kernel - 1 + seq) * channels, T(0));
  if (!state.empty()) std::copy_n(state.data() + b * (kernel - 1) * channels, (kernel - 1) * channels, xe.begin());
  std::copy_n(x.data() + b * seq * channels, seq * channels, xe.begin() + (kernel - 1) * channels);
  return xe;
}

template <class T>
T pre_activation(const std::vector<T>& xe, const std::vector<T>& weight, const std::vector<T>& bias, int64_t t,
                 int64_t c, int64_t channels, int64_t kernel) {
  T z = bias.empty() ? T(0) : bias[c];
  for (int64_t j = 0; j < kernel; ++j) z += weight[c * kernel + j] * xe[(t + j) * channels + c];
  return z;
}

}  // namespace

template <class T>
void short_conv_reference(const ShortConvArgs& args) {
  const int64_t batch = args.x.dim(0), seq = args.x.dim(1), channels = args.x.dim(2), kernel = args.weight.dim(1);
  const std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight);
  const std::vector<T> bias = present(args.bias) ? to_vector<T>(args.bias) : std::vector<T>();
  const std::vector<T> state = present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>();
  std::vector<T> y(x.size()), final_state(batch * (kernel - 1) * channels);
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<T> xe = extended_input(x, state, b, seq, channels, kernel);
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t c = 0; c < channels; ++c) {
        const T z = pre_activation(xe, weight, bias, t, c, channels, kernel);
        y[(b * seq + t) * channels + c] = args.options.silu ? z / (T(1) + std::exp(-z)) : z;
      }
    std::copy_n(xe.data() + seq * channels, (kernel - 1) * channels, final_state.data() + b * (kernel - 1) * channels);
  }
  write_from_vector(args.y, y);
  if (present(args.final_state)) write_from_vector(args.final_state, final_state);
}

template <class T>
void short_conv_backward_reference(const ShortConvBackwardArgs& args) {
  const int64_t batch = args.x.dim(0), seq = args.x.dim(1), channels = args.x.dim(2), kernel = args.weight.dim(1);
  const std::vector<T> x = to_vector<T>(args.x), weight = to_vector<T>(args.weight), dy = to_vector<T>(args.dy);
  const std::vector<T> bias = present(args.bias) ? to_vector<T>(args.bias) : std::vector<T>();
  const std::vector<T> state = present(args.initial_state) ? to_vector<T>(args.initial_state) : std::vector<T>();
  const std::vector<T> d_final = present(args.d_final_state) ? to_vector<T>(args.d_final_state) : std::vector<T>();
  std::vector<T> dx(x.size()), dweight(weight.size(), T(0)), dbias(channels, T(0));
  std::vector<T> d_initial(batch * (kernel - 1) * channels);
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<T> xe = extended_input(x, state, b, seq, channels, kernel);
    std::vector<T> dxe(xe.size(), T(0));
    if (!d_final.empty())
      for (int64_t i = 0; i < (kernel - 1) * channels; ++i)
        dxe[seq * channels + i] += d_final[b * (kernel - 1) * channels + i];
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t c = 0; c < channels; ++c) {
        T dz = dy[(b * seq + t) * channels + c];
        if (args.options.silu) {
          const T z = pre_activation(xe, weight, bias, t, c, channels, kernel);
          const T sigmoid = T(1) / (T(1) + std::exp(-z));
          dz *= sigmoid * (T(1) + z * (T(1) - sigmoid));
        }
        dbias[c] += dz;
        for (int64_t j = 0; j < kernel; ++j) {
          dweight[c * kernel + j] += dz * xe[(t + j) * channels + c];
          dxe[(t + j) * channels + c] += dz * weight[c * kernel + j];
        }
      }
    std::copy_n(dxe.data() + (kernel - 1) * channels, seq * channels, dx.data() + b * seq * channels);
    std::copy_n(dxe.begin(), (kernel - 1) * channels, d_initial.data() + b * (kernel - 1) * channels);
  }
  write_from_vector(args.dx, dx);
  write_from_vector(args.dweight, dweight);
  if (present(args.dbias)) write_from_vector(args.dbias, dbias);
  if (present(args.d_initial_state)) write_from_vector(args.d_initial_state, d_initial);
}

template void short_conv_reference<double>(const ShortConvArgs&);
template void short_conv_reference<float>(const ShortConvArgs&);
template void short_conv_backward_reference<double>(const ShortConvBackwardArgs&);
template void short_conv_backward_reference<float>(const ShortConvBackwardArgs&);

namespace {

template <class Args>
std::string shape_key(const Args& args) {
  return str_cat("batch=", args.x.dim(0), ",seq=", args.x.dim(1), ",channels=", args.x.dim(2),
                 ",kernel=", args.weight.dim(1), ",silu=", args.options.silu ? 1 : 0);
}

template <class Args>
ShortConvCpuConfig heuristic_config(const Args& args, Isa) {
  // A task walks every channel over its block; the walk's start (K - 1 loads) and, in the
  // backward, its lookahead (K - 1 tokens recomputed) are small from 64 tokens up. About 32 tasks
  // keep the threads balanced; the count is a function of the shape only, since the backward sums
  // its dweight partials in block order and must not follow the thread count.
  // Outputs of 16 MiB or more (half a typical L3) are written with streaming stores: they leave
  // the cache anyway, and the stores skip reading each line first.
  const int64_t tokens = args.x.dim(0) * args.x.dim(1);
  const double output_bytes = static_cast<double>(args.x.numel()) * sizeof(float);
  return {std::clamp<int64_t>((tokens + 31) / 32, 64, 512), output_bytes >= 16.0 * (1 << 20) ? 1 : 0};
}

template <class Args>
std::vector<ShortConvCpuConfig> config_space(const Args& args, Isa isa) {
  std::vector<ShortConvCpuConfig> space;
  for (int64_t streaming : {0, 1})
    for (int64_t block : {1, 16, 64, 256, 1024}) space.push_back({block, streaming});
  const ShortConvCpuConfig heuristic = heuristic_config(args, isa);
  if (std::none_of(space.begin(), space.end(), [&](const auto& c) {
        return c.block_tokens == heuristic.block_tokens && c.streaming_stores == heuristic.streaming_stores;
      }))
    space.push_back(heuristic);
  return space;
}

}  // namespace

OpCost short_conv_cost(const ShortConvArgs& args) {
  const double elements = static_cast<double>(args.x.numel()), kernel = static_cast<double>(args.weight.dim(1));
  return {elements * (2 * kernel + (args.options.silu ? 4 : 0)),
          tensor_bytes({args.x, args.weight, args.bias, args.initial_state, args.y, args.final_state})};
}

OpCost short_conv_backward_cost(const ShortConvBackwardArgs& args) {
  const double elements = static_cast<double>(args.x.numel()), kernel = static_cast<double>(args.weight.dim(1));
  return {elements * (6 * kernel + (args.options.silu ? 10 : 1)),
          tensor_bytes({args.x, args.weight, args.bias, args.initial_state, args.dy, args.d_final_state, args.dx,
                        args.dweight, args.dbias, args.d_initial_state})};
}

// The CUDA kernels run on the host, one thread after another, kernel after kernel
// (ops/cuda_emulated_impl.h).
static void emulated_forward(const ShortConvArgs& args, const ShortConvCpuConfig&) {
  const short_conv_cuda::Params p = short_conv_cuda::params_of(args);
  for (int64_t i = 0; i < p.batch * p.seq * p.channels; ++i)
    short_conv_cuda::forward_element(p, i, static_cast<float*>(args.y.data));
  if (present(args.final_state))
    for (int64_t i = 0; i < p.batch * p.channels; ++i)
      short_conv_cuda::final_state_column(p, i, static_cast<float*>(args.final_state.data));
}

static void emulated_backward(const ShortConvBackwardArgs& args, const ShortConvCpuConfig&) {
  const short_conv_cuda::Params p = short_conv_cuda::params_of(args);
  const auto* dy = static_cast<const float*>(args.dy.data);
  for (int64_t i = 0; i < p.batch * (p.kernel - 1 + p.seq) * p.channels; ++i)
    short_conv_cuda::backward_input_element(p, dy, static_cast<const float*>(args.d_final_state.data), i,
                                            static_cast<float*>(args.dx.data),
                                            static_cast<float*>(args.d_initial_state.data));
  std::vector<float> partial(static_cast<size_t>(short_conv_cuda::chunks(p) * p.channels * (p.kernel + 1)));
  for (int64_t i = 0; i < short_conv_cuda::chunks(p) * p.channels; ++i)
    short_conv_cuda::backward_weight_partial(p, dy, i, partial.data());
  for (int64_t c = 0; c < p.channels; ++c)
    short_conv_cuda::backward_weight_total(p, partial.data(), c, static_cast<float*>(args.dweight.data),
                                           static_cast<float*>(args.dbias.data));
}

const Op<ShortConvArgs, ShortConvCpuConfig>& short_conv_op() {
  static const Op<ShortConvArgs, ShortConvCpuConfig> op(
      "short_conv",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(short_conv_forward_kernel, heuristic_config<ShortConvArgs>, config_space<ShortConvArgs>),
          cuda_emulated_impl<ShortConvArgs, ShortConvCpuConfig>(emulated_forward),
          LATHE_CUDA_IMPL(short_conv_cuda_impl)),
      shape_key<ShortConvArgs>);
  return op;
}

const Op<ShortConvBackwardArgs, ShortConvCpuConfig>& short_conv_backward_op() {
  static const Op<ShortConvBackwardArgs, ShortConvCpuConfig> op(
      "short_conv_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(short_conv_backward_kernel, heuristic_config<ShortConvBackwardArgs>,
                                       config_space<ShortConvBackwardArgs>),
                       cuda_emulated_impl<ShortConvBackwardArgs, ShortConvCpuConfig>(emulated_backward),
                       LATHE_CUDA_IMPL(short_conv_backward_cuda_impl)),
      shape_key<ShortConvBackwardArgs>);
  return op;
}

void short_conv(const ShortConvArgs& args, const Dispatch& dispatch) {
  validate(args);
  short_conv_op().run(args, dispatch);
}

void short_conv_backward(const ShortConvBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  short_conv_backward_op().run(args, dispatch);
}

}  // namespace lathe
