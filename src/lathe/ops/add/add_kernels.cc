// add CPU kernel, compiled once per ISA (scalar, avx2, avx512): one flat streaming pass split
// into contiguous chunks across threads.
#include <algorithm>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/add/add.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
constexpr int W = VecF::width;

// kScaleOnly: no a, out = alpha * b.
template <class Element, bool kScaleOnly>
void add_elements(const AddArgs& args, const AddCpuConfig& config) {
  const Element* a = static_cast<const Element*>(args.a.data);
  const Element* b = static_cast<const Element*>(args.b.data);
  Element* out = static_cast<Element*>(args.out.data);
  const VecF alpha = VecF::broadcast(args.alpha);
  parallel_for(args.b.numel(), std::max<int64_t>(config.elements_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i += W) {
      const int64_t n = end - i;
      if constexpr (kScaleOnly)
        simd::store_row(out + i, alpha * simd::load_row(b + i, n), n);
      else
        simd::store_row(out + i, simd::fma(alpha, simd::load_row(b + i, n), simd::load_row(a + i, n)), n);
    }
  });
}

template <class Element>
void add_elements(const AddArgs& args, const AddCpuConfig& config) {
  args.a.data ? add_elements<Element, false>(args, config) : add_elements<Element, true>(args, config);
}

}  // namespace

void add_kernel(const AddArgs& args, const AddCpuConfig& config) {
  if (args.b.numel() == 0) return;
  if (args.b.dtype == DType::bf16)
    add_elements<uint16_t>(args, config);
  else
    add_elements<float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
