#include "lathe/ops/embedding/embedding.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/embedding/embedding_cuda.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(embedding_forward_kernel, EmbeddingArgs, EmbeddingCpuConfig)
LATHE_DECLARE_ISA_KERNEL(embedding_backward_kernel, EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig)

// Chunks of at least ~32K elements amortise the fork/join cost of parallel_for.
static EmbeddingCpuConfig heuristic_config(int64_t dim) {
  return {std::max<int64_t>(1, 32768 / std::max<int64_t>(dim, 1))};
}

static EmbeddingBackwardCpuConfig backward_heuristic_config(int64_t tokens) {
  return {std::max<int64_t>(16, 32768 / std::max<int64_t>(tokens, 1))};
}

static std::vector<EmbeddingCpuConfig> config_space() {
  std::vector<EmbeddingCpuConfig> configs;
  for (int64_t tokens : {1, 4, 16, 64, 256}) configs.push_back({tokens});
  return configs;
}

static std::vector<EmbeddingBackwardCpuConfig> backward_config_space() {
  std::vector<EmbeddingBackwardCpuConfig> configs;
  for (int64_t columns : {16, 64, 256, 1024, 4096}) configs.push_back({columns});
  return configs;
}

// Every id in [0, vocab); the first one outside is reported by position and value. Ids on a GPU
// are copied back for the check (a few bytes per token), so the error is the same on every device.
static void check_ids(ArgChecker& check, const TensorView& device_or_host_ids, int64_t vocab) {
  Tensor host_copy;
  const TensorView ids = host_readable(device_or_host_ids, host_copy);
  const int64_t tokens = ids.dim(0);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t id =
        ids.dtype == DType::i32 ? static_cast<const int32_t*>(ids.data)[t] : static_cast<const int64_t*>(ids.data)[t];
    check.require(id >= 0 && id < vocab, "ids[", t, "] = ", id, " is out of range [0, ", vocab, ")");
  }
}

void validate(const EmbeddingArgs& args) {
  ArgChecker check("embedding");
  check.rank("table", args.table, 2).dtype_in("table", args.table, {DType::f32, DType::bf16});
  check.rank("ids", args.ids, 1).dtype_in("ids", args.ids, {DType::i32, DType::i64});
  int64_t vocab = args.table.dim(0), dim = args.table.dim(1), tokens = args.ids.dim(0);
  check.shape("out", args.out, {tokens, dim}).dtype("out", args.out, args.table.dtype);
  check.contiguous("table", args.table).contiguous("ids", args.ids).contiguous("out", args.out);
  check.require(std::isfinite(args.scale), "scale must be finite, got ", args.scale);
  check_ids(check, args.ids, vocab);
}

void validate(const EmbeddingBackwardArgs& args) {
  ArgChecker check("embedding_backward");
  check.rank("ids", args.ids, 1).dtype_in("ids", args.ids, {DType::i32, DType::i64});
  check.rank("dtable", args.dtable, 2).dtype("dtable", args.dtable, DType::f32);
  int64_t vocab = args.dtable.dim(0), dim = args.dtable.dim(1), tokens = args.ids.dim(0);
  check.shape("d_out", args.d_out, {tokens, dim}).dtype_in("d_out", args.d_out, {DType::f32, DType::bf16});
  check.contiguous("ids", args.ids).contiguous("d_out", args.d_out).contiguous("dtable", args.dtable);
  check.require(std::isfinite(args.scale), "scale must be finite, got ", args.scale);
  check_ids(check, args.ids, vocab);
}

template <class T>
void embedding_reference(const EmbeddingArgs& args) {
  int64_t vocab = args.table.dim(0), dim = args.table.dim(1), tokens = args.ids.dim(0);
  std::vector<T> table = to_vector<T>(args.table), out(tokens * dim);
  std::vector<int64_t> ids = to_vector<int64_t>(args.ids);
  for (int64_t t = 0; t < tokens; ++t) {
    LATHE_CHECK(ids[t] >= 0 && ids[t] < vocab, "embedding_reference: ids[", t, "] = ", ids[t], " is out of range");
    for (int64_t d = 0; d < dim; ++d) out[t * dim + d] = table[ids[t] * dim + d] * T(args.scale);
  }
  write_from_vector(args.out, out);
}

template <class T>
void embedding_backward_reference(const EmbeddingBackwardArgs& args) {
  int64_t vocab = args.dtable.dim(0), dim = args.dtable.dim(1), tokens = args.ids.dim(0);
  std::vector<T> d_out = to_vector<T>(args.d_out), dtable(vocab * dim, T(0));
  std::vector<int64_t> ids = to_vector<int64_t>(args.ids);
  for (int64_t t = 0; t < tokens; ++t) {
    LATHE_CHECK(ids[t] >= 0 && ids[t] < vocab, "embedding_backward_reference: ids[", t, "] = ", ids[t],
                " is out of range");
    for (int64_t d = 0; d < dim; ++d) dtable[ids[t] * dim + d] += d_out[t * dim + d] * T(args.scale);
  }
  write_from_vector(args.dtable, dtable);
}

template void embedding_reference<double>(const EmbeddingArgs&);
template void embedding_reference<float>(const EmbeddingArgs&);
template void embedding_backward_reference<double>(const EmbeddingBackwardArgs&);
template void embedding_backward_reference<float>(const EmbeddingBackwardArgs&);

OpCost embedding_cost(const EmbeddingArgs& args) {
  double elements = static_cast<double>(args.out.numel());
  // Only the looked-up rows are read (upper bound: repeated ids read a row once).
  return {elements, elements * dtype_size(args.table.dtype) * 2 + args.ids.numel() * dtype_size(args.ids.dtype)};
}

OpCost embedding_backward_cost(const EmbeddingBackwardArgs& args) {
  double elements = static_cast<double>(args.d_out.numel());
  // d_out read, every dtable element written once.
  return {2.0 * elements, elements * dtype_size(args.d_out.dtype) + args.dtable.numel() * 4.0 +
                              args.ids.numel() * dtype_size(args.ids.dtype)};
}

const Op<EmbeddingArgs, EmbeddingCpuConfig>& embedding_op() {
  static const Op<EmbeddingArgs, EmbeddingCpuConfig> op(
      "embedding",
      with_cuda_impl(LATHE_ISA_IMPLS(
                         embedding_forward_kernel,
                         [](const EmbeddingArgs& args, Isa) { return heuristic_config(args.table.dim(1)); },
                         [](const EmbeddingArgs&, Isa) { return config_space(); }),
                     LATHE_CUDA_IMPL(embedding_cuda_emulated_impls), LATHE_CUDA_IMPL(embedding_cuda_impl)),
      [](const EmbeddingArgs& args) {
        return str_cat("vocab=", args.table.dim(0), ",dim=", args.table.dim(1), ",tokens=", args.ids.dim(0),
                       ",dtype=", dtype_name(args.table.dtype));
      });
  return op;
}

const Op<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>& embedding_backward_op() {
  static const Op<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig> op(
      "embedding_backward",
      with_cuda_impl(
          LATHE_ISA_IMPLS(
              embedding_backward_kernel,
              [](const EmbeddingBackwardArgs& args, Isa) { return backward_heuristic_config(args.ids.dim(0)); },
              [](const EmbeddingBackwardArgs&, Isa) { return backward_config_space(); }),
          LATHE_CUDA_IMPL(embedding_backward_cuda_emulated_impls), LATHE_CUDA_IMPL(embedding_backward_cuda_impl)),
      [](const EmbeddingBackwardArgs& args) {
        return str_cat("vocab=", args.dtable.dim(0), ",dim=", args.dtable.dim(1), ",tokens=", args.ids.dim(0),
                       ",dtype=", dtype_name(args.d_out.dtype));
      });
  return op;
}

void embedding(const EmbeddingArgs& args, const Dispatch& dispatch) {
  validate(args);
  embedding_op().run(args, dispatch);
}

void embedding_backward(const EmbeddingBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  embedding_backward_op().run(args, dispatch);
}

}  // namespace lathe
