#include "lathe/ops/moe_permute/moe_permute.h"

#include <algorithm>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/moe_permute/moe_permute_cuda.h"
#include "lathe/ops/moe_permute/moe_permute_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(moe_permute_kernel, MoePermuteArgs, MoePermuteCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_permute_backward_kernel, MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig)

// Chunks of at least ~32K elements amortise the fork/join cost of parallel_for.
static int64_t rows_for_32k_elements(int64_t d) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(d, 1)); }

// Streaming stores pay off once permuted no longer fits in the last-level cache.
static MoePermuteCpuConfig heuristic_config(const MoePermuteArgs& args) {
  const double permuted_bytes = static_cast<double>(args.permuted.numel()) * dtype_size(args.x.dtype);
  return {rows_for_32k_elements(args.x.dim(1)), permuted_bytes > 16e6 ? 1 : 0};
}

static std::vector<MoePermuteCpuConfig> config_space() {
  std::vector<MoePermuteCpuConfig> configs;
  for (int64_t streaming : {0, 1})
    for (int64_t rows : {1, 4, 16, 64, 256}) configs.push_back({rows, streaming});
  return configs;
}

static MoePermuteBackwardCpuConfig backward_heuristic_config(const MoePermuteBackwardArgs& args) {
  const int64_t tokens = std::max<int64_t>(1, rows_for_32k_elements(args.dx.dim(1)) / std::max<int64_t>(args.top_k, 1));
  return {tokens, args.dx.numel() * 4.0 > 16e6 ? 1 : 0};
}

static std::vector<MoePermuteBackwardCpuConfig> backward_config_space() {
  std::vector<MoePermuteBackwardCpuConfig> configs;
  for (int64_t streaming : {0, 1})
    for (int64_t tokens : {1, 4, 16, 64, 256}) configs.push_back({tokens, streaming});
  return configs;
}

void validate(const MoePermuteArgs& args) {
  ArgChecker check("moe_permute");
  check.rank("x", args.x, 2).dtype_in("x", args.x, {DType::f32, DType::bf16});
  check.rank("expert_ids", args.expert_ids, 2).dtype("expert_ids", args.expert_ids, DType::i32);
  const int64_t tokens = args.x.dim(0), d = args.x.dim(1), top_k = args.expert_ids.dim(1);
  check.require(args.expert_ids.dim(0) == tokens, "expert_ids has ", args.expert_ids.dim(0),
                " rows, expected one per token of x (", tokens, ")");
  check.at_least("top_k (expert_ids.dim(1))", top_k, 1).at_least("n_experts", args.n_experts, 1);
  check.require(args.n_experts <= INT32_MAX && tokens * top_k <= INT32_MAX,
                "n_experts and tokens * top_k must fit in i32, got ", args.n_experts, " and ", tokens * top_k);
  const int64_t slots = tokens * top_k;
  check.shape("permuted", args.permuted, {slots, d}).dtype("permuted", args.permuted, args.x.dtype);
  check.shape("group_offsets", args.group_offsets, {args.n_experts + 1})
      .dtype("group_offsets", args.group_offsets, DType::i64);
  check.shape("source", args.source, {slots}).dtype("source", args.source, DType::i32);
  check.shape("destination", args.destination, {slots}).dtype("destination", args.destination, DType::i32);
  check.contiguous("x", args.x).contiguous("expert_ids", args.expert_ids).contiguous("permuted", args.permuted);
  check.contiguous("group_offsets", args.group_offsets).contiguous("source", args.source);
  check.contiguous("destination", args.destination);
  Tensor host_copy;
  const int32_t* ids = static_cast<const int32_t*>(host_readable(args.expert_ids, host_copy).data);
  for (int64_t s = 0; s < slots; ++s)
    check.require(ids[s] >= 0 && ids[s] < args.n_experts, "expert_ids[", s / top_k, ", ", s % top_k, "] = ", ids[s],
                  " is out of range [0, ", args.n_experts, ")");
}

void validate(const MoePermuteBackwardArgs& args) {
  ArgChecker check("moe_permute_backward");
  check.at_least("top_k", args.top_k, 1);
  check.rank("dx", args.dx, 2).dtype("dx", args.dx, DType::f32);
  const int64_t tokens = args.dx.dim(0), d = args.dx.dim(1), slots = tokens * args.top_k;
  check.shape("d_permuted", args.d_permuted, {slots, d}).dtype("d_permuted", args.d_permuted, DType::f32);
  check.shape("destination", args.destination, {slots}).dtype("destination", args.destination, DType::i32);
  check.contiguous("d_permuted", args.d_permuted).contiguous("destination", args.destination);
  check.contiguous("dx", args.dx);
  Tensor host_copy;
  const int32_t* destination = static_cast<const int32_t*>(host_readable(args.destination, host_copy).data);
  for (int64_t s = 0; s < slots; ++s)
    check.require(destination[s] >= 0 && destination[s] < slots, "destination[", s, "] = ", destination[s],
                  " is out of range [0, ", slots, ")");
}

// The stable counting sort: one pass counts each expert's slots, a prefix sum gives the offsets,
// a second pass in slot order hands each slot its expert's next free row.
static void permutation_reference(const MoePermuteArgs& args, std::vector<int64_t>& offsets,
                                  std::vector<int64_t>& source, std::vector<int64_t>& destination) {
  const std::vector<int64_t> ids = to_vector<int64_t>(args.expert_ids);
  const int64_t slots = static_cast<int64_t>(ids.size());
  offsets.assign(args.n_experts + 1, 0);
  for (int64_t s = 0; s < slots; ++s) {
    LATHE_CHECK(ids[s] >= 0 && ids[s] < args.n_experts, "moe_permute_reference: expert id ", ids[s], " out of range");
    ++offsets[ids[s] + 1];
  }
  for (int64_t e = 0; e < args.n_experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  source.assign(slots, -1);
  destination.assign(slots, -1);
  for (int64_t s = 0; s < slots; ++s) {
    destination[s] = next[ids[s]]++;
    source[destination[s]] = s;
  }
}

// Integers up to 2^53 are exact in double, the element type write_from_vector takes for any dtype.
static void write_indices(const TensorView& view, const std::vector<int64_t>& indices) {
  write_from_vector(view, std::vector<double>(indices.begin(), indices.end()));
}

template <class T>
void moe_permute_reference(const MoePermuteArgs& args) {
  const int64_t d = args.x.dim(1), top_k = args.expert_ids.dim(1);
  std::vector<int64_t> offsets, source, destination;
  permutation_reference(args, offsets, source, destination);
  const std::vector<T> x = to_vector<T>(args.x);
  std::vector<T> permuted(source.size() * d);
  for (size_t r = 0; r < source.size(); ++r) {
    const int64_t t = source[r] / top_k;
    for (int64_t j = 0; j < d; ++j) permuted[r * d + j] = x[t * d + j];
  }
  write_from_vector(args.permuted, permuted);
  write_indices(args.group_offsets, offsets);
  write_indices(args.source, source);
  write_indices(args.destination, destination);
}

template <class T>
void moe_permute_backward_reference(const MoePermuteBackwardArgs& args) {
  const int64_t tokens = args.dx.dim(0), d = args.dx.dim(1), top_k = args.top_k;
  const std::vector<T> d_permuted = to_vector<T>(args.d_permuted);
  const std::vector<int64_t> destination = to_vector<int64_t>(args.destination);
  std::vector<T> dx = args.accumulate ? to_vector<T>(args.dx) : std::vector<T>(tokens * d, T(0));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t row = destination[t * top_k + k];
      LATHE_CHECK(row >= 0 && row < tokens * top_k, "moe_permute_backward_reference: destination out of range");
      for (int64_t j = 0; j < d; ++j) dx[t * d + j] += d_permuted[row * d + j];
    }
  write_from_vector(args.dx, dx);
}

template void moe_permute_reference<double>(const MoePermuteArgs&);
template void moe_permute_reference<float>(const MoePermuteArgs&);
template void moe_permute_backward_reference<double>(const MoePermuteBackwardArgs&);
template void moe_permute_backward_reference<float>(const MoePermuteBackwardArgs&);

OpCost moe_permute_cost(const MoePermuteArgs& args) {
  const double slots = static_cast<double>(args.expert_ids.numel()), element = dtype_size(args.x.dtype);
  // x read once, every permuted row written; ids read, offsets + source + destination written.
  return {0.0, static_cast<double>(args.x.numel()) * element + static_cast<double>(args.permuted.numel()) * element +
                   slots * 4 * 3 + (args.n_experts + 1) * 8.0};
}

OpCost moe_permute_backward_cost(const MoePermuteBackwardArgs& args) {
  const double dx_bytes = static_cast<double>(args.dx.numel()) * 4;
  // d_permuted and destination read; dx written (and read when accumulating). One add per element.
  return {static_cast<double>(args.d_permuted.numel()), static_cast<double>(args.d_permuted.numel()) * 4 +
                                                            args.destination.numel() * 4.0 +
                                                            dx_bytes * (args.accumulate ? 2 : 1)};
}

// The CUDA kernels run on the host, one thread after another (ops/cuda_emulated_impl.h).
template <class Word>
static void emulated_copy(const MoePermuteArgs& args) {
  const int64_t top_k = args.expert_ids.dim(1), d = args.x.dim(1), n = args.permuted.numel();
  for (int64_t i = 0; i < n; ++i)
    moe_permute_cuda::copy_element(static_cast<const Word*>(args.x.data), static_cast<const int32_t*>(args.source.data),
                                   top_k, d, i, static_cast<Word*>(args.permuted.data));
}

static void emulated_forward(const MoePermuteArgs& args, const MoePermuteCpuConfig&) {
  const auto* ids = static_cast<const int32_t*>(args.expert_ids.data);
  auto* offsets = static_cast<int64_t*>(args.group_offsets.data);
  const int64_t slots = args.expert_ids.numel();
  for (int64_t e = 0; e < args.n_experts; ++e) moe_permute_cuda::count_expert(ids, slots, e, offsets);
  moe_permute_cuda::counts_to_offsets(offsets, args.n_experts);
  for (int64_t e = 0; e < args.n_experts; ++e)
    moe_permute_cuda::assign_expert(ids, slots, e, offsets, static_cast<int32_t*>(args.source.data),
                                    static_cast<int32_t*>(args.destination.data));
  args.x.dtype == DType::bf16 ? emulated_copy<uint16_t>(args) : emulated_copy<uint32_t>(args);
}

static void emulated_backward(const MoePermuteBackwardArgs& args, const MoePermuteBackwardCpuConfig&) {
  for (int64_t i = 0; i < args.dx.numel(); ++i)
    moe_permute_cuda::sum_element(static_cast<const float*>(args.d_permuted.data),
                                  static_cast<const int32_t*>(args.destination.data), args.top_k, args.dx.dim(1),
                                  args.accumulate, i, static_cast<float*>(args.dx.data));
}

const Op<MoePermuteArgs, MoePermuteCpuConfig>& moe_permute_op() {
  static const Op<MoePermuteArgs, MoePermuteCpuConfig> op(
      "moe_permute",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_permute_kernel, [](const MoePermuteArgs& args, Isa) { return heuristic_config(args); },
                           [](const MoePermuteArgs&, Isa) { return config_space(); }),
                       cuda_emulated_impl<MoePermuteArgs, MoePermuteCpuConfig>(emulated_forward),
                       LATHE_CUDA_IMPL(moe_permute_cuda_impl)),
      [](const MoePermuteArgs& args) {
        return str_cat("tokens=", args.x.dim(0), ",d=", args.x.dim(1), ",experts=", args.n_experts,
                       ",top_k=", args.expert_ids.dim(1), ",dtype=", dtype_name(args.x.dtype));
      });
  return op;
}

const Op<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig>& moe_permute_backward_op() {
  static const Op<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig> op(
      "moe_permute_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_permute_backward_kernel,
                           [](const MoePermuteBackwardArgs& args, Isa) { return backward_heuristic_config(args); },
                           [](const MoePermuteBackwardArgs&, Isa) { return backward_config_space(); }),
                       cuda_emulated_impl<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig>(emulated_backward),
                       LATHE_CUDA_IMPL(moe_permute_backward_cuda_impl)),
      [](const MoePermuteBackwardArgs& args) {
        return str_cat("tokens=", args.dx.dim(0), ",d=", args.dx.dim(1), ",top_k=", args.top_k,
                       ",accumulate=", int(args.accumulate));
      });
  return op;
}

void moe_permute(const MoePermuteArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_permute_op().run(args, dispatch);
}

void moe_permute_backward(const MoePermuteBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_permute_backward_op().run(args, dispatch);
}

}  // namespace lathe
