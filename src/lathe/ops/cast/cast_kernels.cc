// cast CPU kernel, compiled once per ISA (scalar, avx2, avx512): one streaming pass split into
// contiguous chunks across threads, bf16 widened exactly and rounded to nearest-even by simd.h.
#include <algorithm>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/cast/cast.h"

namespace lathe::LATHE_ISA_NS {
namespace {

constexpr int W = simd::VecF::width;

template <class From, class To>
void cast_elements(const CastArgs& args, const CastCpuConfig& config) {
  const From* in = static_cast<const From*>(args.in.data);
  To* out = static_cast<To*>(args.out.data);
  parallel_for(args.in.numel(), std::max<int64_t>(config.elements_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i += W) {
      const int64_t n = end - i;
      simd::store_row(out + i, simd::load_row(in + i, n), n);
    }
  });
}

}  // namespace

void cast_kernel(const CastArgs& args, const CastCpuConfig& config) {
  if (args.in.numel() == 0) return;
  const bool from_bf16 = args.in.dtype == DType::bf16, to_bf16 = args.out.dtype == DType::bf16;
  if (from_bf16 && to_bf16) return cast_elements<uint16_t, uint16_t>(args, config);
  if (from_bf16) return cast_elements<uint16_t, float>(args, config);
  if (to_bf16) return cast_elements<float, uint16_t>(args, config);
  cast_elements<float, float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
