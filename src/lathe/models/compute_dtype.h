// The dtype a model's matmuls multiply in (train.dtype): f32, or bf16 weights and activations with
// f32 accumulation, f32 master weights and f32 gradients (TransformerModel::set_compute_dtype).
// Which one a run actually gets on this CPU is train/compute_dtype.h's decision.
#pragma once

namespace lathe {

// bf16: bf16 weights/activations, f32 master weights. automatic ("auto", train.dtype only): bf16
// where it is faster on this CPU, else f32 (train/compute_dtype.h); a model never computes in it.
enum class ComputeDtype { f32, bf16, automatic };
const char* to_string(ComputeDtype dtype);

}  // namespace lathe
