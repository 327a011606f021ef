// Raw bytes of tensors of any layout, for serialization (safetensors, checkpoint snapshots).
#pragma once

#include <cstdint>

#include "lathe/core/tensor.h"

namespace lathe {

// numel * element size.
int64_t tensor_byte_size(const TensorView& view);

// Copies the elements of `source` (any strides) in row-major order into `destination`, which
// must hold tensor_byte_size(source) bytes. Runs on the calling thread only (callers on
// background threads must not contend for the shared pool).
void copy_to_contiguous(const TensorView& source, void* destination);

}  // namespace lathe
