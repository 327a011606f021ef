#!/usr/bin/env python3
"""Writes, for every model type lathe imports, the config.json a user might hand it with only the
required keys, and the same config as transformers completes it with its own defaults.

  python3 tests/hf_oracle/make_config_defaults.py [--out tests/golden/hf_defaults]

For each model type it writes OUT/<model_type>.json:
  {"transformers": VERSION,
   "minimal": {...},   model_type + architectures + the sizes (no optional key at all)
   "full":    {...}}   transformers' own to_dict() of the config class built from "minimal"

hf_config_test reads both through lathe's importer and requires the same model config: a key a
config.json leaves out must take the default transformers uses for that model type, never lathe's
own (issue 19, item 5). Needs transformers; nothing is downloaded.
"""
import argparse
import json
import math
import os

import transformers

# The sizes every config names (without them nothing can be built), per model type; no other key.
# 128 heads: a multiple of every class default of num_key_value_heads (8, 16, 32, 128), so the defaults
# a minimal config takes are a valid model in every class.
SIZES = dict(vocab_size=96, hidden_size=256, intermediate_size=128, num_hidden_layers=4, num_attention_heads=128)
MOE_SIZES = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)

MODEL_TYPES = {
    "llama": ("LlamaForCausalLM", SIZES),
    "mistral": ("MistralForCausalLM", SIZES),
    "qwen2": ("Qwen2ForCausalLM", SIZES),
    "qwen3": ("Qwen3ForCausalLM", SIZES),
    "gemma2": ("Gemma2ForCausalLM", SIZES),
    "gemma3_text": ("Gemma3ForCausalLM", SIZES),
    "mixtral": ("MixtralForCausalLM", dict(SIZES, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("Qwen2MoeForCausalLM", dict(SIZES, **MOE_SIZES, shared_expert_intermediate_size=64)),
    "qwen3_moe": ("Qwen3MoeForCausalLM", dict(SIZES, **MOE_SIZES)),
    "olmoe": ("OlmoeForCausalLM", dict(SIZES, num_experts=4, num_experts_per_tok=2)),
    "deepseek_v2": ("DeepseekV2ForCausalLM", dict(SIZES, n_routed_experts=16, num_experts_per_tok=2,
                                                    moe_intermediate_size=32)),
    "deepseek_v3": ("DeepseekV3ForCausalLM", dict(SIZES, n_routed_experts=16, num_experts_per_tok=2,
                                                    moe_intermediate_size=32)),
    "qwen3_next": ("Qwen3NextForCausalLM", dict(SIZES, **MOE_SIZES)),
    "qwen3_5_text": ("Qwen3_5ForCausalLM", SIZES),
    # no attention: its own size keys (hidden_size * expand 2 = num_heads * head_dim; n_groups 8 divides 8 heads)
    "mamba2": ("Mamba2ForCausalLM", dict(vocab_size=96, hidden_size=256, num_hidden_layers=4, num_heads=8,
                                         head_dim=64)),
}


def jsonable(value):
    """JSON values as transformers 5.x writes them: a non-finite float as {"__float__": "Infinity"}."""
    def finite(item):
        if isinstance(item, float) and not math.isfinite(item):
            return {"__float__": str(item).replace("inf", "Infinity")}
        if isinstance(item, (list, tuple)):
            return [finite(entry) for entry in item]
        if isinstance(item, dict):
            return {key: finite(entry) for key, entry in item.items()}
        return item
    return finite(json.loads(json.dumps(value, default=str)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "golden", "hf_defaults"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for model_type, (architecture, sizes) in MODEL_TYPES.items():
        minimal = dict(model_type=model_type, architectures=[architecture], **sizes)
        config = transformers.AutoConfig.for_model(model_type, **sizes)
        config.architectures = [architecture]
        full = jsonable(config.to_dict())
        full.pop("transformers_version", None)
        record = {"transformers": transformers.__version__, "minimal": minimal, "full": full}
        with open(os.path.join(args.out, model_type + ".json"), "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        print(model_type, len(full), "keys")


if __name__ == "__main__":
    main()
