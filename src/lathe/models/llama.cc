// The Llama block (also Mistral, Qwen2 and Qwen3, which differ only by config: sliding windows,
// q/k/v biases, q/k norms): pre-norm residual attention, then pre-norm residual gated MLP.
//   h = h + attention(norm_1(h));  h = h + mlp(norm_2(h))
#include "lathe/models/llama.h"

namespace lathe {

std::vector<std::string> LlamaFamily::layer_norm_names() const {
  return {"input_layernorm", "post_attention_layernorm"};
}

autograd::Var LlamaFamily::block(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                                 const autograd::Var& h) const {
  autograd::Var attended = self_attention(tape, context, weights, norm(tape, context, h, weights.norm[0]));
  autograd::Var after_attention = autograd::add(tape, h, attended);
  autograd::Var mlp_out = gated_mlp(tape, context, weights, norm(tape, context, after_attention, weights.norm[1]));
  return autograd::add(tape, after_attention, mlp_out);
}

}  // namespace lathe
