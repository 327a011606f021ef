// Which checkpoint tensors hold which part of a lathe parameter. Most parameters are one tensor
// under their own (HF) name. A mixture-of-experts layer's stacked expert weights are stored by
// published checkpoints one tensor per expert and projection (HfMoe in models/family_spec.h):
//   mlp.experts.gate_up_proj (E, 2F, d)  <- <block>.experts.<e>.<gate_proj>.weight (F, d) into rows [0, F) of e,
//                                           <block>.experts.<e>.<up_proj>.weight (F, d) into rows [F, 2F) of e
//   mlp.experts.down_proj (E, d, F)      <- <block>.experts.<e>.<down_proj>.weight (d, F)
//   mlp.gate.weight (E, d)               <- <block>.gate.weight   (Mixtral's block is "block_sparse_moe")
// Import reads each piece into its view; export writes the pieces (views, no copies), so the
// files load in transformers 4.x and 5.x alike.
// GPT-OSS (HfMoe::transposed_stacked_experts) stores its stacked experts as one tensor each under
// lathe's name, transposed per expert:
//   mlp.experts.gate_up_proj (E, 2F, d)  <- the same name, (E, d, 2F): the view transpose(1, 2)
//   mlp.experts.down_proj (E, d, F)      <- the same name, (E, F, d): the view transpose(1, 2)
// Such a view is not contiguous: import reads the tensor into a temporary and copies it, export
// writes a contiguous copy.
// A family with HfFamily::checkpoint_name (Mamba-2) stores each parameter whole under that name
// ("backbone.layers.0.mixer.in_proj.weight" for lathe's "model.layers.0.mixer.in_proj.weight").
#pragma once

#include <string>
#include <vector>

#include "lathe/models/transformer.h"

namespace lathe {

struct HfTensorPiece {
  std::string hf_name;  // the checkpoint tensor
  TensorView view;      // the part of the parameter it holds, in the checkpoint's shape (contiguous, except
                        // GPT-OSS's transposed experts)
};

// The pieces of one parameter of a model of `family`: itself under its name, or the per-expert tensors.
std::vector<HfTensorPiece> hf_tensor_pieces(const Parameter& parameter, const FamilySpec& family);

}  // namespace lathe
