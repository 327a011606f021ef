// cast CPU kernel, compiled once per ISA (scalar, avx2, avx512): contiguous chunks across threads,
// each converted by core's span kernel of the same ISA (core/bf16_convert.h: the rounding of
// convert(), so both give the same bits), or copied when the dtypes match.
#include <algorithm>
#include <cstring>

#include "lathe/core/bf16_convert.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/cast/cast.h"

namespace lathe::LATHE_ISA_NS {

void cast_kernel(const CastArgs& args, const CastCpuConfig& config) {
  if (args.in.numel() == 0) return;
  const bool from_bf16 = args.in.dtype == DType::bf16, to_bf16 = args.out.dtype == DType::bf16;
  const size_t in_size = dtype_size(args.in.dtype), out_size = dtype_size(args.out.dtype);
  const char* in = static_cast<const char*>(args.in.data);
  char* out = static_cast<char*>(args.out.data);
  parallel_for(args.in.numel(), std::max<int64_t>(config.elements_per_task, 1), [&](int64_t begin, int64_t end) {
    const char* from = in + begin * in_size;
    char* to = out + begin * out_size;
    const int64_t n = end - begin;
    if (from_bf16 == to_bf16)
      std::memcpy(to, from, static_cast<size_t>(n) * in_size);
    else if (to_bf16)
      f32_to_bf16_span(reinterpret_cast<const float*>(from), reinterpret_cast<uint16_t*>(to), n);
    else
      bf16_to_f32_span(reinterpret_cast<const uint16_t*>(from), reinterpret_cast<float*>(to), n);
  });
}

}  // namespace lathe::LATHE_ISA_NS
