// lathe's side of the Hugging Face golden checks (tests/python/hf_oracle_test.py): loads a model
// directory written by tests/hf_oracle/make_tiny_models.py with load_hf_model and repeats what the
// goldens recorded from transformers, on the prompts and batch stored in golden.json:
//
//   hf_oracle_dump HF_DIR GOLDEN_JSON OUT.safetensors
//     logits_f32.<i>   (positions, vocab) f32  prompt i, lathe in float32
//     logits_bf16.<i>  (positions, vocab) f32  prompt i, lathe's bf16 compute path
//     loss             (1) f64                 mean cross-entropy of batch_inputs -> batch_targets, plus
//                                              for MoE models router_aux_loss_coef * aux_loss
//     aux_loss         (1) f64                 MoE models: the load-balancing loss over all layers
//     grad.<name>      f32                     its gradient for every parameter (HF names and layouts)
// Exit 2 with one line on stderr for unreadable input.
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/hf/hf_tensor_pieces.h"
#include "lathe/models/transformer.h"

namespace {

// A JSON array of arrays of ints -> one (1, length) i32 tensor per row.
std::vector<lathe::Tensor> int_rows(const lathe::Json& rows, const char* what) {
  std::vector<lathe::Tensor> tensors;
  for (const lathe::Json& row : rows.items(what)) {
    lathe::Tensor tensor = lathe::Tensor::empty({1, static_cast<int64_t>(row.size())}, lathe::DType::i32);
    int64_t column = 0;
    for (const lathe::Json& id : row.items(what))
      tensor.ptr<int32_t>()[column++] = static_cast<int32_t>(id.as_int(what));
    tensors.push_back(tensor);
  }
  return tensors;
}

lathe::Tensor stack_rows(const std::vector<lathe::Tensor>& rows) {
  const int64_t columns = rows.at(0).view().dim(1);
  lathe::Tensor batch = lathe::Tensor::empty({static_cast<int64_t>(rows.size()), columns}, lathe::DType::i32);
  for (size_t r = 0; r < rows.size(); ++r) {
    LATHE_CHECK(rows[r].view().dim(1) == columns, "hf_oracle_dump: batch rows differ in length");
    std::copy(rows[r].ptr<int32_t>(), rows[r].ptr<int32_t>() + columns, batch.ptr<int32_t>() + r * columns);
  }
  return batch;
}

void dump(const std::string& hf_dir, const std::string& golden_path, const std::string& out_path) {
  std::ifstream file(golden_path);
  LATHE_CHECK(file.good(), "hf_oracle_dump: cannot open ", golden_path);
  std::stringstream text;
  text << file.rdbuf();
  const lathe::Json golden = lathe::Json::parse(text.str());
  const std::vector<lathe::Tensor> prompts = int_rows(golden.get("prompts"), "prompts");
  const lathe::Tensor inputs = stack_rows(int_rows(golden.get("batch_inputs"), "batch_inputs"));
  const lathe::Tensor targets = stack_rows(int_rows(golden.get("batch_targets"), "batch_targets"));

  lathe::TransformerModel model = lathe::load_hf_model(hf_dir);
  std::vector<lathe::Tensor> keep_alive;
  lathe::NamedTensorViews out;
  for (const char* dtype : {"f32", "bf16"}) {
    model.set_compute_dtype(std::string(dtype) == "bf16" ? lathe::ComputeDtype::bf16 : lathe::ComputeDtype::f32);
    for (size_t i = 0; i < prompts.size(); ++i) {
      keep_alive.push_back(model.logits(prompts[i]));
      out.emplace_back(lathe::str_cat("logits_", dtype, ".", i), keep_alive.back().view().select(0, 0));
    }
  }
  model.set_compute_dtype(lathe::ComputeDtype::f32);
  model.zero_grads();
  lathe::autograd::Tape tape;
  lathe::RouterStatistics routing;
  const lathe::autograd::Var loss = model.loss(tape, inputs, targets, lathe::RematPolicy::save_all, 1.0f, &routing);
  tape.backward(loss);
  // The objective the gradients belong to: cross-entropy (+ the router losses of an MoE model,
  // as transformers adds router_aux_loss_coef * aux_loss with output_router_logits).
  const lathe::ModelConfig& config = model.config();
  lathe::Tensor loss_value = lathe::Tensor::empty({1}, lathe::DType::f64);
  loss_value.ptr<double>()[0] = static_cast<double>(loss->value.ptr<float>()[0]) +
                                config.moe_aux_loss_coef * routing.aux_loss + config.moe_z_loss_coef * routing.z_loss;
  out.emplace_back("loss", loss_value.view());
  lathe::Tensor aux_loss = lathe::Tensor::empty({1}, lathe::DType::f64);
  aux_loss.ptr<double>()[0] = routing.aux_loss;
  if (model.has_experts()) out.emplace_back("aux_loss", aux_loss.view());
  // By HF name, in the layout transformers keeps the parameter in: lathe's own, except where the
  // checkpoint stores the parameter under its own name through another view (GPT-OSS's experts,
  // transposed per expert, models/hf/hf_tensor_pieces.h): then that view of the gradient; and
  // under the checkpoint's name where the architecture roots its tensors elsewhere (Mamba-2's "backbone.").
  const lathe::FamilySpec& family = lathe::find_family_spec(config.family);
  keep_alive.reserve(keep_alive.size() + model.parameters().size());
  for (const lathe::Parameter& parameter : model.parameters()) {
    if (parameter.kind == lathe::ParameterKind::buffer) continue;  // a buffer in transformers too: no gradient
    lathe::Parameter gradient = parameter;
    gradient.var = lathe::autograd::make_var(parameter.var->grad);
    const std::vector<lathe::HfTensorPiece> pieces = lathe::hf_tensor_pieces(gradient, family);
    if (pieces.size() == 1 && pieces[0].hf_name == parameter.name && !pieces[0].view.is_contiguous()) {
      keep_alive.push_back(lathe::convert(pieces[0].view, parameter.var->grad.dtype()));
      out.emplace_back("grad." + parameter.name, keep_alive.back().view());
    } else {
      const std::string& name = family.hf.checkpoint_name ? pieces[0].hf_name : parameter.name;
      out.emplace_back("grad." + name, parameter.var->grad.view());
    }
  }
  lathe::write_safetensors(out_path, out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: hf_oracle_dump HF_DIR GOLDEN_JSON OUT.safetensors\n");
    return 2;
  }
  try {
    dump(argv[1], argv[2], argv[3]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
  return 0;
}
