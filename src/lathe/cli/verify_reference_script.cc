#include "lathe/cli/verify_reference_script.h"

namespace lathe::cli {

const char* const kVerifyReferenceScript = R"PYTHON(
"""Reference logits from Hugging Face transformers for `lathe verify` (embedded in the lathe binary)."""
import json
import sys

try:
    import torch
    import transformers
    from safetensors.torch import save_file
except ImportError as error:
    print(f"cannot import {error.name}", file=sys.stderr)
    sys.exit(3)


def main():
    model_dir, prompts_path, out_path = sys.argv[1:4]
    with open(prompts_path) as file:
        prompts = json.load(file)
    options = dict(attn_implementation="eager")
    # transformers >= 4.56 calls it dtype; older releases only know torch_dtype.
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **options)
    except TypeError:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, **options)
    model.eval()
    tensors = {}
    with torch.no_grad():
        for index, prompt in enumerate(prompts):
            ids = torch.tensor([prompt], dtype=torch.long)
            tensors[f"logits.{index}"] = model(ids).logits[0].float().contiguous()
            tensors[f"prompt.{index}"] = ids[0].to(torch.int32).contiguous()
    save_file(tensors, out_path, metadata={"transformers_version": transformers.__version__,
                                           "torch_version": torch.__version__})


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one line for lathe to pass on
        print(f"{type(error).__name__}: {error}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
)PYTHON";

}  // namespace lathe::cli
