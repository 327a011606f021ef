// Memory-bound production ops: RMSNorm, softmax, LayerNorm, RoPE (Llama-3 frequency scaling) and
// the AdamW step, each the op's own registered problem (inputs, reference, dispatch:
// suite_op_problem.h). oneDNN 2.6 has no RMSNorm, RoPE or AdamW, so there is no vendor row
// (bench/suite_torch.py times PyTorch's). The row-wise ones name their inputs, so the kernel lab
// and `lathe optimize` (its row-kernel family) can judge candidates for them.
#include "lathe/bench/suite/suite_common.h"
#include "lathe/bench/suite/suite_op_problem.h"
#include "lathe/ops/layer_norm/layer_norm.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe {

using NamedInputs = std::vector<std::pair<std::string, TensorView>>;

void register_elementwise_problems(std::vector<SuiteEntry>& entries) {
  add_op_suite_problem(entries,
                       llm_info("rms_norm", "RMSNorm over the hidden size", "Llama-3-8B hidden (4096), 2048 tokens"),
                       "rms_norm", "rows=2048,dim=4096", "rows=13,dim=37", {}, [](OpProblem& problem) -> NamedInputs {
                         const auto& args = op_problem_args<RmsNormArgs, RmsNormCpuConfig>(problem);
                         return {{"x", args.x}, {"weight", args.weight}};
                       });
  add_op_suite_problem(entries,
                       llm_info("softmax", "softmax of scaled attention scores over the keys",
                                "Llama-3.2-1B attention scores (scale 1/sqrt(64)), 4 heads x 1024 queries x 1024 keys"),
                       "softmax", "rows=4096,cols=1024,scale=0.125", "rows=13,cols=37,scale=0.125", {},
                       [](OpProblem& problem) -> NamedInputs {
                         return {{"x", op_problem_args<SoftmaxArgs, SoftmaxCpuConfig>(problem).x}};
                       });
  add_op_suite_problem(
      entries,
      llm_info("layer_norm", "LayerNorm with bias over the hidden size", "GPT-2 medium hidden (1024), 2048 tokens"),
      "layer_norm", "rows=2048,dim=1024", "rows=13,dim=37", {}, [](OpProblem& problem) -> NamedInputs {
        const auto& args = op_problem_args<LayerNormArgs, LayerNormCpuConfig>(problem);
        return {{"x", args.x}, {"weight", args.weight}, {"bias", args.bias}};
      });
  add_op_suite_problem(entries,
                       llm_info("rope", "rotary position embedding with Llama-3 frequency scaling (theta 500000)",
                                "Llama-3-8B queries (32 heads x 128) with Llama-3.2 rope scaling, 2048 tokens"),
                       "rope", "seq=2048,heads=32,head_dim=128,theta=500000,scaling=llama3",
                       "seq=11,heads=3,head_dim=16,theta=500000,scaling=llama3");
  add_op_suite_problem(entries,
                       llm_info("adamw_step", "one AdamW step with decoupled weight decay, in place",
                                "a 4M-parameter shard of Llama-3.2-1B's 1.24B parameters (16 MB per tensor)"),
                       "adamw", str_cat("n=", 4 << 20), "n=1003");
}

}  // namespace lathe
