// The Gemma 2/3 block: every sublayer is normalised on the way in and on the way out ("sandwich"
// norms) before joining the residual stream. Gemma's other traits (sqrt(d_model) embedding
// scale, (1 + w) norm weights, soft-capping, local:global attention, GeGLU) are config values.
//   h = h + norm_2(attention(norm_1(h)));  h = h + norm_4(mlp(norm_3(h)))
#include "lathe/models/gemma.h"

namespace lathe {

std::vector<std::string> GemmaFamily::layer_norm_names() const {
  return {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"};
}

autograd::Var GemmaFamily::block(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                                 const autograd::Var& h) const {
  autograd::Var attended = self_attention(tape, context, weights, norm(tape, context, h, weights.norm[0]));
  autograd::Var after_attention = autograd::add(tape, h, norm(tape, context, attended, weights.norm[1]));
  autograd::Var mlp_out = gated_mlp(tape, context, weights, norm(tape, context, after_attention, weights.norm[2]));
  return autograd::add(tape, after_attention, norm(tape, context, mlp_out, weights.norm[3]));
}

}  // namespace lathe
