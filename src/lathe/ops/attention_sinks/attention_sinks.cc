#include "lathe/ops/attention_sinks/attention_sinks.h"

#include <vector>

#include "lathe/ops/attention_sinks/attention_sinks_cuda.h"
#include "lathe/ops/attention_sinks/attention_sinks_cuda_body.h"
#include "lathe/ops/attention_sinks/attention_sinks_rows.h"
#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(attention_sinks_kernel, AttentionSinksArgs, AttentionSinksConfig)
LATHE_DECLARE_ISA_KERNEL(attention_sinks_backward_kernel, AttentionSinksBackwardArgs, AttentionSinksConfig)

namespace {

using attention_sinks_rows::Dims;
using attention_sinks_rows::dims_of;

// o's (batch, seq, heads, v_dim), lse's (batch, heads, seq) and sinks' (heads), all f32 and contiguous.
void check_common(ArgChecker& check, const TensorView& o, const TensorView& lse, const TensorView& sinks) {
  check.rank("o", o, 4).dtype("o", o, DType::f32).contiguous("o", o);
  check.shape("lse", lse, {o.dim(0), o.dim(2), o.dim(1)}).dtype("lse", lse, DType::f32).contiguous("lse", lse);
  check.shape("sinks", sinks, {o.dim(2)}).dtype("sinks", sinks, DType::f32).contiguous("sinks", sinks);
}

void check_like(ArgChecker& check, const char* name, const TensorView& t, const TensorView& like) {
  check.shape(name, t, {like.dim(0), like.dim(1), like.dim(2), like.dim(3)}).dtype(name, t, DType::f32);
  check.contiguous(name, t);
}

}  // namespace

void validate(const AttentionSinksArgs& args) {
  ArgChecker check("attention_sinks");
  check_common(check, args.o, args.lse, args.sinks);
  check_like(check, "o_out", args.o_out, args.o);
  check.shape("lse_out", args.lse_out, {args.o.dim(0), args.o.dim(2), args.o.dim(1)})
      .dtype("lse_out", args.lse_out, DType::f32)
      .contiguous("lse_out", args.lse_out);
}

void validate(const AttentionSinksBackwardArgs& args) {
  ArgChecker check("attention_sinks_backward");
  check_common(check, args.o, args.lse, args.sinks);
  check_like(check, "d_o", args.d_o, args.o);
  check.shape("d_sinks", args.d_sinks, {args.o.dim(2)})
      .dtype("d_sinks", args.d_sinks, DType::f32)
      .contiguous("d_sinks", args.d_sinks);
}

template <class T>
void attention_sinks_reference(const AttentionSinksArgs& args) {
  const Dims d = dims_of(args.o);
  const std::vector<T> o = to_vector<T>(args.o), lse = to_vector<T>(args.lse), sinks = to_vector<T>(args.sinks);
  std::vector<T> o_out(o.size()), lse_out(lse.size());
  for (int64_t r = 0; r < static_cast<int64_t>(lse.size()); ++r)
    attention_sinks_rows::fold_row<T>(o.data(), lse.data(), sinks.data(), d, r, o_out.data(), lse_out.data());
  write_from_vector(args.o_out, o_out);
  write_from_vector(args.lse_out, lse_out);
}

template <class T>
void attention_sinks_backward_reference(const AttentionSinksBackwardArgs& args) {
  const Dims d = dims_of(args.o);
  const std::vector<T> o = to_vector<T>(args.o), d_o = to_vector<T>(args.d_o), lse = to_vector<T>(args.lse);
  const std::vector<T> sinks = to_vector<T>(args.sinks);
  std::vector<double> terms(lse.size());
  for (size_t r = 0; r < terms.size(); ++r)
    terms[r] =
        attention_sinks_rows::row_term<T>(o.data(), d_o.data(), lse.data(), sinks.data(), d, static_cast<int64_t>(r));
  std::vector<T> d_sinks(sinks.size());
  for (int64_t h = 0; h < d.heads; ++h) attention_sinks_rows::head_gradient<T>(terms.data(), d, h, d_sinks.data());
  write_from_vector(args.d_sinks, d_sinks);
}

template void attention_sinks_reference<double>(const AttentionSinksArgs&);
template void attention_sinks_reference<float>(const AttentionSinksArgs&);
template void attention_sinks_backward_reference<double>(const AttentionSinksBackwardArgs&);
template void attention_sinks_backward_reference<float>(const AttentionSinksBackwardArgs&);

OpCost attention_sinks_cost(const AttentionSinksArgs& args) {
  const double elements = static_cast<double>(args.o.numel()), rows = static_cast<double>(args.lse.numel());
  return {elements + 6 * rows, 8 * elements + 8 * rows};
}
OpCost attention_sinks_backward_cost(const AttentionSinksBackwardArgs& args) {
  const double elements = static_cast<double>(args.o.numel()), rows = static_cast<double>(args.lse.numel());
  return {2 * elements + 4 * rows, 8 * elements + 4 * rows};
}

// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h).
static void emulated_forward(const AttentionSinksArgs& args, const AttentionSinksConfig&) {
  const attention_sinks_cuda::ForwardTensors t(args);
  for (int64_t r = 0; r < t.dims.batch * t.dims.heads * t.dims.seq; ++r) attention_sinks_cuda::fold(t, r);
}
static void emulated_backward(const AttentionSinksBackwardArgs& args, const AttentionSinksConfig&) {
  const attention_sinks_cuda::BackwardTensors t(args);
  std::vector<double> terms(static_cast<size_t>(t.dims.batch * t.dims.heads * t.dims.seq));
  for (int64_t r = 0; r < static_cast<int64_t>(terms.size()); ++r) attention_sinks_cuda::term(t, r, terms.data());
  for (int64_t h = 0; h < t.dims.heads; ++h) attention_sinks_cuda::sum_head(t, h, terms.data());
}

template <class Args>
static std::string shape_key(const Args& args) {
  return str_cat("batch=", args.o.dim(0), ",seq=", args.o.dim(1), ",heads=", args.o.dim(2), ",v_dim=", args.o.dim(3));
}

const Op<AttentionSinksArgs, AttentionSinksConfig>& attention_sinks_op() {
  static const Op<AttentionSinksArgs, AttentionSinksConfig> op(
      "attention_sinks",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              attention_sinks_kernel, [](const AttentionSinksArgs&, Isa) { return AttentionSinksConfig{}; },
              [](const AttentionSinksArgs&, Isa) { return std::vector<AttentionSinksConfig>{{}}; }),
          cuda_emulated_impl<AttentionSinksArgs, AttentionSinksConfig>(emulated_forward),
          LATHE_CUDA_IMPL(attention_sinks_cuda_impl)),
      shape_key<AttentionSinksArgs>);
  return op;
}

const Op<AttentionSinksBackwardArgs, AttentionSinksConfig>& attention_sinks_backward_op() {
  static const Op<AttentionSinksBackwardArgs, AttentionSinksConfig> op(
      "attention_sinks_backward",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              attention_sinks_backward_kernel,
              [](const AttentionSinksBackwardArgs&, Isa) { return AttentionSinksConfig{}; },
              [](const AttentionSinksBackwardArgs&, Isa) { return std::vector<AttentionSinksConfig>{{}}; }),
          cuda_emulated_impl<AttentionSinksBackwardArgs, AttentionSinksConfig>(emulated_backward),
          LATHE_CUDA_IMPL(attention_sinks_backward_cuda_impl)),
      shape_key<AttentionSinksBackwardArgs>);
  return op;
}

void attention_sinks(const AttentionSinksArgs& args, const Dispatch& dispatch) {
  validate(args);
  attention_sinks_op().run(args, dispatch);
}

void attention_sinks_backward(const AttentionSinksBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  attention_sinks_backward_op().run(args, dispatch);
}

}  // namespace lathe
