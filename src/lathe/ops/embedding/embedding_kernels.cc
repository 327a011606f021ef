// Embedding CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Forward: tokens split statically across threads, each output row a scaled vector copy of its
// table row. Backward: (1) dtable zeroed by vocab row ranges (memset: streaming stores for large
// ranges), (2) column blocks split across threads; each thread walks all tokens in order and adds
// its block of d_out[t] into dtable[ids[t]]. No two threads touch the same element and each
// element's sum runs in token order: deterministic for any thread count, no atomics, and balanced
// however the ids repeat.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/embedding/embedding.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
using simd::load_row;
using simd::store_row;
constexpr int W = VecF::width;
// Column blocks of the backward are multiples of this many floats (one 64-byte cache line), so
// no two threads write the same cache line of dtable.
constexpr int64_t kColumnGroup = 16;

template <class Element, class Index>
void forward(const EmbeddingArgs& args, const EmbeddingCpuConfig& config) {
  const int64_t dim = args.table.dim(1), tokens = args.ids.dim(0);
  const Element* table = static_cast<const Element*>(args.table.data);
  const Index* ids = static_cast<const Index*>(args.ids.data);
  Element* out = static_cast<Element*>(args.out.data);
  const VecF scale = VecF::broadcast(args.scale);
  parallel_for(tokens, std::max<int64_t>(config.tokens_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const Element* row = table + static_cast<int64_t>(ids[t]) * dim;
      Element* out_row = out + t * dim;
      int64_t d = 0;
      for (; d + 2 * W <= dim; d += 2 * W) {
        store_row(out_row + d, load_row(row + d, W) * scale, W);
        store_row(out_row + d + W, load_row(row + d + W, W) * scale, W);
      }
      for (; d < dim; d += W) store_row(out_row + d, load_row(row + d, dim - d) * scale, dim - d);
    }
  });
}

template <class Element, class Index>
void backward(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig& config) {
  const int64_t vocab = args.dtable.dim(0), dim = args.dtable.dim(1), tokens = args.ids.dim(0);
  const Index* ids = static_cast<const Index*>(args.ids.data);
  const Element* d_out = static_cast<const Element*>(args.d_out.data);
  float* dtable = static_cast<float*>(args.dtable.data);
  const VecF scale = VecF::broadcast(args.scale);
  parallel_for(vocab, std::max<int64_t>(1, 65536 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
    std::memset(dtable + begin * dim, 0, sizeof(float) * (end - begin) * dim);
  });
  if (tokens == 0 || dim == 0) return;
  const int64_t groups = (dim + kColumnGroup - 1) / kColumnGroup;
  const int64_t grain = std::max<int64_t>(1, (config.columns_per_task + kColumnGroup - 1) / kColumnGroup);
  parallel_for(groups, grain, [&](int64_t group_begin, int64_t group_end) {
    const int64_t column_begin = group_begin * kColumnGroup;
    const int64_t column_end = std::min(dim, group_end * kColumnGroup);
    for (int64_t t = 0; t < tokens; ++t) {
      float* target = dtable + static_cast<int64_t>(ids[t]) * dim;
      const Element* source = d_out + t * dim;
      for (int64_t d = column_begin; d < column_end; d += W) {
        int64_t n = column_end - d;
        store_row(target + d, simd::fma(load_row(source + d, n), scale, load_row(target + d, n)), n);
      }
    }
  });
}

template <class Element>
void forward_for_ids(const EmbeddingArgs& args, const EmbeddingCpuConfig& config) {
  if (args.ids.dtype == DType::i32)
    forward<Element, int32_t>(args, config);
  else
    forward<Element, int64_t>(args, config);
}

template <class Element>
void backward_for_ids(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig& config) {
  if (args.ids.dtype == DType::i32)
    backward<Element, int32_t>(args, config);
  else
    backward<Element, int64_t>(args, config);
}

}  // namespace

void embedding_forward_kernel(const EmbeddingArgs& args, const EmbeddingCpuConfig& config) {
  if (args.table.dtype == DType::bf16)
    forward_for_ids<uint16_t>(args, config);
  else
    forward_for_ids<float>(args, config);
}

void embedding_backward_kernel(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig& config) {
  if (args.d_out.dtype == DType::bf16)
    backward_for_ids<uint16_t>(args, config);
  else
    backward_for_ids<float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
