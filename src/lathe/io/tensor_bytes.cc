#include "lathe/io/tensor_bytes.h"

#include <cstring>

namespace lathe {

int64_t tensor_byte_size(const TensorView& view) { return view.numel() * dtype_size(view.dtype); }

void copy_to_contiguous(const TensorView& source, void* destination) {
  int64_t count = source.numel();
  if (count == 0) return;
  size_t element = static_cast<size_t>(dtype_size(source.dtype));
  if (source.is_contiguous()) {
    std::memcpy(destination, source.data, static_cast<size_t>(count) * element);
    return;
  }
  // Merge trailing axes that are laid out contiguously into one run copied with memcpy, then
  // walk the remaining outer axes like an odometer.
  int rank = source.rank();
  int inner_axis = rank;
  int64_t run = 1;
  while (inner_axis > 0 && (source.shape[inner_axis - 1] == 1 || source.strides[inner_axis - 1] == run)) {
    run *= source.shape[inner_axis - 1];
    --inner_axis;
  }
  size_t run_bytes = static_cast<size_t>(run) * element;
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;  // in elements, from source.data
  auto* out = static_cast<char*>(destination);
  const auto* base = static_cast<const char*>(source.data);
  for (int64_t done = 0; done < count; done += run) {
    std::memcpy(out, base + offset * static_cast<int64_t>(element), run_bytes);
    out += run_bytes;
    for (int axis = inner_axis - 1; axis >= 0; --axis) {
      if (++index[axis] < source.shape[axis]) {
        offset += source.strides[axis];
        break;
      }
      offset -= (source.shape[axis] - 1) * source.strides[axis];
      index[axis] = 0;
    }
  }
}

}  // namespace lathe
