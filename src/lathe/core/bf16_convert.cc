#include "lathe/core/bf16_convert.h"

#include "lathe/core/error.h"
#include "lathe/core/parallel.h"

namespace lathe {

namespace {

static_assert(sizeof(bf16) == sizeof(uint16_t));

// Elements per task: 256 KB of floats, so a 1M-element activation goes to every thread of a small
// pool while each task is long enough to amortise its hand-out.
constexpr int64_t kConvertGrain = 1 << 16;

using ToBf16 = void (*)(const float*, uint16_t*, int64_t);
using ToF32 = void (*)(const uint16_t*, float*, int64_t);

ToBf16 to_bf16_kernel(Isa isa) {
  return isa >= Isa::avx512 ? avx512::f32_to_bf16_span : isa >= Isa::avx2 ? avx2::f32_to_bf16_span
                                                                          : scalar::f32_to_bf16_span;
}
ToF32 to_f32_kernel(Isa isa) {
  return isa >= Isa::avx512 ? avx512::bf16_to_f32_span : isa >= Isa::avx2 ? avx2::bf16_to_f32_span
                                                                          : scalar::bf16_to_f32_span;
}

uint16_t* bits(bf16* p) { return reinterpret_cast<uint16_t*>(p); }
const uint16_t* bits(const bf16* p) { return reinterpret_cast<const uint16_t*>(p); }

}  // namespace

void convert_f32_to_bf16(const float* source, bf16* dest, int64_t n) {
  const ToBf16 kernel = to_bf16_kernel(active_isa());
  parallel_for(n, kConvertGrain,
               [&](int64_t begin, int64_t end) { kernel(source + begin, bits(dest) + begin, end - begin); });
}

void convert_bf16_to_f32(const bf16* source, float* dest, int64_t n) {
  const ToF32 kernel = to_f32_kernel(active_isa());
  parallel_for(n, kConvertGrain,
               [&](int64_t begin, int64_t end) { kernel(bits(source) + begin, dest + begin, end - begin); });
}

void convert_f32_to_bf16_with(Isa isa, const float* source, bf16* dest, int64_t n) {
  LATHE_CHECK(isa_available(isa), "convert_f32_to_bf16_with: ", isa_name(isa), " is not available here");
  to_bf16_kernel(isa)(source, bits(dest), n);
}

void convert_bf16_to_f32_with(Isa isa, const bf16* source, float* dest, int64_t n) {
  LATHE_CHECK(isa_available(isa), "convert_bf16_to_f32_with: ", isa_name(isa), " is not available here");
  to_f32_kernel(isa)(bits(source), dest, n);
}

}  // namespace lathe
