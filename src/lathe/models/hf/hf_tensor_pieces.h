// Which checkpoint tensors hold which part of a lathe parameter. Most parameters are one tensor
// under their own (HF) name. A mixture-of-experts layer's stacked expert weights are stored by
// published checkpoints one tensor per expert and projection (HfMoe in models/family_spec.h):
//   mlp.experts.gate_up_proj (E, 2F, d)  <- <block>.experts.<e>.<gate_proj>.weight (F, d) into rows [0, F) of e,
//                                           <block>.experts.<e>.<up_proj>.weight (F, d) into rows [F, 2F) of e
//   mlp.experts.down_proj (E, d, F)      <- <block>.experts.<e>.<down_proj>.weight (d, F)
//   mlp.gate.weight (E, d)               <- <block>.gate.weight   (Mixtral's block is "block_sparse_moe")
// Import reads each piece into its view; export writes the pieces (views, no copies), so the
// files load in transformers 4.x and 5.x alike.
#pragma once

#include <string>
#include <vector>

#include "lathe/models/transformer.h"

namespace lathe {

struct HfTensorPiece {
  std::string hf_name;  // the checkpoint tensor
  TensorView view;      // the part of the parameter it holds (contiguous)
};

// The pieces of one parameter of a model of `family`: itself under its name, or the per-expert tensors.
std::vector<HfTensorPiece> hf_tensor_pieces(const Parameter& parameter, const FamilySpec& family);

}  // namespace lathe
