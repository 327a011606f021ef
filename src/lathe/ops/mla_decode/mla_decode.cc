#include "lathe/ops/mla_decode/mla_decode.h"

#include <algorithm>
#include <cmath>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/mla_decode/mla_decode_cuda.h"
#include "lathe/ops/mla_decode/mla_decode_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(mla_decode_kernel, MlaDecodeArgs, MlaDecodeCpuConfig)

void validate(const MlaDecodeArgs& args) {
  ArgChecker check("mla_decode");
  check.rank("q", args.q, 4).dtype_in("q", args.q, {DType::f32, DType::bf16}).contiguous("q", args.q);
  const int64_t batch = args.q.dim(0), seq_q = args.q.dim(1), n_heads = args.q.dim(2), width = args.q.dim(3);
  check.rank("cache", args.cache, 3).dtype("cache", args.cache, args.q.dtype);
  const int64_t seq_k = args.cache.dim(1);
  check.shape("cache", args.cache, {batch, seq_k, width});
  check.require((args.cache.stride(2) == 1 || width <= 1) && (args.cache.stride(1) == width || seq_k <= 1),
                "cache has strides (", args.cache.stride(0), ", ", args.cache.stride(1), ", ", args.cache.stride(2),
                "), expected packed rows (*, ", width, ", 1)");
  check.rank("o", args.o, 4).dtype("o", args.o, args.q.dtype).contiguous("o", args.o);
  const int64_t kv_rank = args.o.dim(3);
  check.shape("o", args.o, {batch, seq_q, n_heads, kv_rank});
  check.require(kv_rank >= 1 && kv_rank <= width, "o has kv_rank ", kv_rank, ", expected 1 .. ", width,
                " (the width of q and cache rows)");
  check.rank("lse", args.lse, 3).shape("lse", args.lse, {batch, n_heads, seq_q});
  check.dtype("lse", args.lse, DType::f32).contiguous("lse", args.lse);
  check.require(args.options.scale > 0 && std::isfinite(args.options.scale), "scale is ", args.options.scale,
                ", expected > 0 (MLA passes its scale explicitly)");
}

namespace {

// Keys visible to query i: [0, end).
int64_t visible_end(bool causal, int64_t i, int64_t seq_q, int64_t seq_k) {
  return causal ? std::clamp<int64_t>(i + seq_k - seq_q + 1, 0, seq_k) : seq_k;
}

}  // namespace

template <class T>
void mla_decode_reference(const MlaDecodeArgs& args) {
  const int64_t batch = args.q.dim(0), seq_q = args.q.dim(1), n_heads = args.q.dim(2), width = args.q.dim(3);
  const int64_t seq_k = args.cache.dim(1), kv_rank = args.o.dim(3);
  const T scale = T(args.options.scale);
  std::vector<T> q = to_vector<T>(args.q), cache = to_vector<T>(args.cache);
  std::vector<T> o(static_cast<size_t>(args.o.numel()), T(0)), lse(static_cast<size_t>(batch * n_heads * seq_q));
  std::vector<T> scores(static_cast<size_t>(seq_k));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < seq_q; ++i) {
      const int64_t end = visible_end(args.options.causal, i, seq_q, seq_k);
      for (int64_t h = 0; h < n_heads; ++h) {
        const T* q_row = &q[((b * seq_q + i) * n_heads + h) * width];
        T* o_row = &o[((b * seq_q + i) * n_heads + h) * kv_rank];
        T max_score = -INFINITY;
        for (int64_t j = 0; j < end; ++j) {
          const T* row = &cache[(b * seq_k + j) * width];
          T dot = 0;
          for (int64_t d = 0; d < width; ++d) dot += q_row[d] * row[d];
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j < end; ++j) sum += std::exp(scores[j] - max_score);
        for (int64_t j = 0; j < end; ++j) {
          const T p = std::exp(scores[j] - max_score) / sum;
          const T* row = &cache[(b * seq_k + j) * width];
          for (int64_t d = 0; d < kv_rank; ++d) o_row[d] += p * row[d];
        }
        lse[(b * n_heads + h) * seq_q + i] = end > 0 ? max_score + std::log(sum) : T(-INFINITY);
      }
    }
  write_from_vector(args.o, o);
  write_from_vector(args.lse, lse);
}

template void mla_decode_reference<double>(const MlaDecodeArgs&);
template void mla_decode_reference<float>(const MlaDecodeArgs&);

OpCost mla_decode_cost(const MlaDecodeArgs& args) {
  const int64_t seq_q = args.q.dim(1), seq_k = args.cache.dim(1);
  double pairs = 0;  // visible (query, key) pairs, exactly
  for (int64_t i = 0; i < seq_q; ++i) pairs += static_cast<double>(visible_end(args.options.causal, i, seq_q, seq_k));
  const double batch = static_cast<double>(args.q.dim(0)), n_heads = static_cast<double>(args.q.dim(2));
  const double width = static_cast<double>(args.q.dim(3)), kv_rank = static_cast<double>(args.o.dim(3));
  // q . row over the full width, p * c_kv over kv_rank.
  const double flops = 2.0 * batch * n_heads * pairs * (width + kv_rank);
  // Reads q and the cache rows once; writes o and lse.
  const double element = dtype_size(args.q.dtype);
  const double bytes = element * static_cast<double>(args.q.numel() + args.cache.numel() + args.o.numel()) +
                       4.0 * static_cast<double>(args.lse.numel());
  return {flops, bytes};
}

namespace {

std::string shape_key(const MlaDecodeArgs& args) {
  return str_cat("batch=", args.q.dim(0), ",seq_q=", args.q.dim(1), ",seq_k=", args.cache.dim(1),
                 ",heads=", args.q.dim(2), ",kv_rank=", args.o.dim(3), ",rope_dim=", args.q.dim(3) - args.o.dim(3),
                 ",causal=", args.options.causal ? 1 : 0, ",dtype=", dtype_name(args.q.dtype));
}

// Query-row tiles of up to 64 rows (decode: all seq_q x n_heads rows in one tile, so each cache row
// is read once per batch); 64-key score tiles as flash_attention. The key range is split into parts
// until there are at least 16 tasks, so a single decode token still spreads over the threads, but
// no part gets fewer than 4 key blocks (at 512 keys, 8 parts measured 1.6x slower than 1 on 2
// threads: the per-part Q^T packing and the merge outweigh the work). The split count depends only
// on the shape (results do not change with the thread count).
MlaDecodeCpuConfig heuristic_config(const MlaDecodeArgs& args) {
  MlaDecodeCpuConfig config;
  const int64_t rows = args.q.dim(1) * args.q.dim(2), seq_k = args.cache.dim(1);
  config.block_q = std::clamp<int64_t>(rows, 1, 64);
  config.block_k = std::clamp<int64_t>(seq_k, 16, 64);
  const int64_t row_tasks = std::max<int64_t>(1, args.q.dim(0) * ((rows + config.block_q - 1) / config.block_q));
  const int64_t key_blocks = (seq_k + config.block_k - 1) / config.block_k;
  config.key_splits =
      std::clamp<int64_t>((16 + row_tasks - 1) / row_tasks, 1, std::clamp<int64_t>(key_blocks / 4, 1, 16));
  return config;
}

std::vector<MlaDecodeCpuConfig> config_space(const MlaDecodeArgs& args) {
  std::vector<MlaDecodeCpuConfig> configs;
  for (int64_t block_q : {16, 32, 64, 128})
    for (int64_t block_k : {32, 64, 128})
      for (int64_t key_splits : {1, 2, 4, 8, 16}) configs.push_back({block_q, block_k, key_splits});
  configs.push_back({7, 5, 3});  // awkward tiles keep the tail paths honest
  // The heuristic is always offered (its block_q follows the row count).
  MlaDecodeCpuConfig heuristic = heuristic_config(args);
  bool present = false;
  for (const auto& c : configs)
    present |= c.block_q == heuristic.block_q && c.block_k == heuristic.block_k && c.key_splits == heuristic.key_splits;
  if (!present) configs.push_back(heuristic);
  return configs;
}

}  // namespace

// The CUDA kernel run on the host, one thread after another (ops/cuda_emulated_impl.h).
static void emulated_decode(const MlaDecodeArgs& args, const MlaDecodeCpuConfig&) {
  mla_decode_cuda::Params p = mla_decode_cuda::params_of(args);
  std::vector<float> workspace(static_cast<size_t>(p.workspace_floats())), acc(static_cast<size_t>(p.kv_rank));
  p.workspace = workspace.data();
  for (int64_t index = 0; index < p.rows() * p.parts; ++index) mla_decode_cuda::attend_part(p, index, acc.data());
  if (p.parts > 1)
    for (int64_t r = 0; r < p.rows(); ++r) mla_decode_cuda::merge_row(p, r, acc.data());
}

const Op<MlaDecodeArgs, MlaDecodeCpuConfig>& mla_decode_op() {
  static const Op<MlaDecodeArgs, MlaDecodeCpuConfig> op(
      "mla_decode",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              mla_decode_kernel, [](const MlaDecodeArgs& args, Isa) { return heuristic_config(args); },
              [](const MlaDecodeArgs& args, Isa) { return config_space(args); }),
          cuda_emulated_impl<MlaDecodeArgs, MlaDecodeCpuConfig>(emulated_decode, mla_decode_cuda::supported),
          LATHE_CUDA_IMPL(mla_decode_cuda_impl)),
      shape_key);
  return op;
}

void mla_decode(const MlaDecodeArgs& args, const Dispatch& dispatch) {
  validate(args);
  mla_decode_op().run(args, dispatch);
}

}  // namespace lathe
