"""`lathe convert` against the live transformers library, for every supported architecture.

For each one: transformers builds a tiny random model (every weight random, norms and biases too,
so a swapped or dropped tensor changes the logits) and saves it sharded; lathe converts it to a
lathe checkpoint and back to a Hugging Face directory (f32 and bf16); transformers'
from_pretrained loads the result, which must give the original logits (f32: bit for bit, the
weights are copied exactly; bf16: those of the original with its weights rounded to bf16).
It also loads each transformers-saved directory with lathe (tests/tools/hf_logits_dump) and
compares lathe's f32 logits with transformers' (eager attention, f32): max |diff| must stay below
1e-5 * (1 + max |logit|); measured 5e-7 to 6e-6 on logits of scale 2-9 (sequence longer than the
sliding windows, so windows, softcaps, llama3 scaling and Qwen2 biases all count).
Usage: hf_convert_check.py LATHE_BINARY HF_LOGITS_DUMP   (exit 77 without torch/transformers)
"""
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
except ImportError:
    print("skipped: torch/transformers not installed")
    sys.exit(77)

LATHE, LOGITS_DUMP = sys.argv[1], sys.argv[2]
COMMON = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
              head_dim=8, max_position_embeddings=128, rms_norm_eps=1e-6)
ARCHITECTURES = {
    "llama": (transformers.LlamaConfig, dict(num_hidden_layers=2, rope_scaling={
        "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}, rope_theta=5e5)),
    "mistral": (transformers.MistralConfig, dict(num_hidden_layers=2, sliding_window=5)),
    "qwen2": (transformers.Qwen2Config, dict(num_hidden_layers=2, tie_word_embeddings=True)),
    "qwen3": (transformers.Qwen3Config, dict(num_hidden_layers=2)),
    "gemma2": (transformers.Gemma2Config, dict(num_hidden_layers=3, sliding_window=4, query_pre_attn_scalar=24)),
    "gemma3": (transformers.Gemma3TextConfig, dict(num_hidden_layers=4, sliding_window=4, sliding_window_pattern=2,
                                                    query_pre_attn_scalar=16, rope_local_base_freq=100.0)),
    # Mixtures of experts: per-expert checkpoint tensors, stacked by lathe and split again on export.
    "mixtral": (transformers.MixtralConfig, dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": (transformers.Qwen3MoeConfig, dict(num_hidden_layers=2, num_experts=4, num_experts_per_tok=2,
                                                    moe_intermediate_size=16, mlp_only_layers=[1], norm_topk_prob=True)),
    "qwen2_moe": (transformers.Qwen2MoeConfig, dict(num_hidden_layers=2, num_experts=4, num_experts_per_tok=2,
                                                    moe_intermediate_size=16, shared_expert_intermediate_size=24)),
    "olmoe": (transformers.OlmoeConfig, dict(num_hidden_layers=2, num_experts=4, num_experts_per_tok=2)),
    # experts stored transposed (E, in, out), so sharded and bf16 exports go through lathe's transposed views
    "gpt_oss": (transformers.GptOssConfig, dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                                                 sliding_window=5, rope_parameters={"rope_type": "default",
                                                                                    "rope_theta": 10000.0})),
    # linear-attention hybrids: gated delta net / gated full attention / gated delta net (GQA ratio 2, Dk != Dv)
    "qwen3_next": (transformers.Qwen3NextConfig, dict(
        num_hidden_layers=3, layer_types=["linear_attention", "full_attention", "linear_attention"],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
        mlp_only_layers=[1], rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.5})),
    "qwen3_5_text": (transformers.Qwen3_5TextConfig, dict(
        num_hidden_layers=3, layer_types=["linear_attention", "full_attention", "linear_attention"],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
    # no attention (STANDALONE: none of COMMON's decoder keys): the SSD mixer with "backbone." checkpoint names,
    # projection biases, B/C in 2 groups, a clamped step size
    "mamba2": (transformers.Mamba2Config, dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_heads=8,
                                                head_dim=8, state_size=8, n_groups=2, use_bias=True, chunk_size=4,
                                                time_step_limit=(0.0, 0.5))),
}
EAGER_EXPERTS = ("gpt_oss", "qwen3_next")  # the per-expert loop, as tests/hf_oracle uses
STANDALONE = ("mamba2",)


def lathe(*args):
    result = subprocess.run([LATHE, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"lathe {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.float()


def main():
    failures = []
    ids = torch.randint(0, COMMON["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1))
    for name, (config_class, extra) in ARCHITECTURES.items():
        torch.manual_seed(0)
        config = config_class(**({} if name in STANDALONE else COMMON), **extra)
        config._attn_implementation = "eager"
        if name in EAGER_EXPERTS:
            config._experts_implementation = "eager"
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.normal_(0.0, 0.3)
        expected = logits(model, ids)
        with tempfile.TemporaryDirectory() as scratch:
            source, run, out, out_bf16 = (str(Path(scratch) / part) for part in ("hf", "run", "out", "out_bf16"))
            model.save_pretrained(source, max_shard_size="20KB")  # several shards + index
            assert (Path(source) / "model.safetensors.index.json").exists(), "transformers did not shard"
            dump = str(Path(scratch) / "logits.bin")
            result = subprocess.run([LOGITS_DUMP, source, dump, *map(str, ids[0].tolist())], capture_output=True,
                                    text=True)
            if result.returncode != 0:
                raise SystemExit(f"hf_logits_dump failed: {result.stderr.strip()}")
            ours = torch.from_numpy(numpy.fromfile(dump, dtype=numpy.float32).reshape(expected[0].shape))
            forward_difference = (ours - expected[0]).abs().max().item()
            bound = 1e-5 * (1.0 + expected[0].abs().max().item())
            if forward_difference > bound:
                failures.append(f"{name}: lathe logits differ from transformers by {forward_difference} > {bound}")
            lathe("convert", "--from", "hf", source, "--to", run)
            lathe("convert", "--from", run, "--to", "hf", out, "--max-shard-size", "16KB")
            lathe("convert", "--from", run, "--to", "hf", out_bf16, "--dtype", "bf16")
            # The reloads run the original's expert implementation (from_pretrained would pick grouped_mm).
            eager = dict(experts_implementation="eager") if name in EAGER_EXPERTS else {}
            reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager",
                                                            **eager).eval()
            # The reference is transformers' own reload of its save: for Qwen3-Next that differs from the
            # model in memory by ~5e-7 (the same weights bitwise; a different kernel path in transformers),
            # while lathe's export reloads bit for bit like it.
            original = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, attn_implementation="eager",
                                                            **eager).eval()
            difference = (logits(reloaded, ids) - logits(original, ids)).abs().max().item()
            if type(reloaded) is not type(model) or difference != 0.0:
                failures.append(f"{name}: {type(reloaded).__name__}, f32 max |logit diff| {difference}")
            # bf16: the original with bf16-rounded weights, both computed in f32.
            rounded = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
            rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
            reloaded_bf16 = AutoModelForCausalLM.from_pretrained(out_bf16, dtype=torch.float32, attn_implementation="eager",
                                                                 **eager).eval()
            difference_bf16 = (logits(reloaded_bf16, ids) - logits(rounded, ids)).abs().max().item()
            if difference_bf16 != 0.0:
                failures.append(f"{name}: bf16 export max |logit diff| {difference_bf16}")
            print(f"{name}: {type(model).__name__} lathe vs transformers logits {forward_difference:.2e} "
                  f"(bound {bound:.1e}); round trip f32 diff {difference}, bf16 diff {difference_bf16}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"ok: {len(ARCHITECTURES)} architectures, transformers {transformers.__version__}")


main()
