"""An independent PyTorch implementation of lathe's decoder (src/lathe/models/model_config.h), the
oracle the C++ model and trainer are compared against.

Configured by a JSON object with ModelConfig's field names; parameters use the Hugging Face names
and (out, in) layouts listed at the top of model_config.h. Semantics (B batch, T tokens):
  h = embed[ids] * s                      s = sqrt(d_model) if embedding_scale == 0 else embedding_scale
  per layer: x = rms(h, input_layernorm); q, k, v projections -> (B, T, heads, head_dim)
             qk_norm: q, k = rms per head; RoPE (HF rotate-half) on the first rotary_dim dims
             scores = scale * q.k, optional tanh softcap, causal, sliding window on local layers, GQA
             sandwich_norms: h += rms(o, post_attention_layernorm); x = rms(h, pre_feedforward_layernorm)
             else:           h += o;                              x = rms(h, post_attention_layernorm)
             m = down(act(gate(x)) * up(x)); sandwich_norms: m = rms(m, post_feedforward_layernorm); h += m
  logits = rms(h, model.norm) W^T (W = lm_head or the embedding when tied), optional tanh softcap
  rms(x, w) = x / sqrt(mean(x^2) + norm_eps) * (w + norm_weight_offset), in float32 or wider.
dtype: float32 (default) or float64 for every parameter and activation.
attention="reference" is plain math (the oracle); "sdpa" uses F.scaled_dot_product_attention where it
exists and the layer has no softcap (benchmarks).
"""

import json
import math

import torch
import torch.nn.functional as F

# ModelConfig's fields and defaults (model_config.h). rope_local_theta is an addition: RoPE base of
# local (sliding-window) layers when > 0 (Gemma 3 uses 10k locally, 1M globally).
MODEL_CONFIG_DEFAULTS = {
    "family": "llama",
    "vocab_size": 4096,
    "d_model": 256,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 4,
    "head_dim": 0,
    "ffn_dim": 1024,
    "ffn_activation": "silu",
    "max_seq_len": 256,
    "rope_theta": 10000.0,
    "rope_local_theta": 0.0,
    "partial_rotary_factor": 1.0,
    "rope_scaling": "none",
    "rope_scaling_factor": 8.0,
    "rope_low_freq_factor": 1.0,
    "rope_high_freq_factor": 4.0,
    "rope_original_max_position": 8192,
    "norm_eps": 1e-5,
    "norm_weight_offset": 0.0,
    "tie_embeddings": False,
    "qk_norm": False,
    "embedding_scale": 1.0,
    "sandwich_norms": False,
    "attention_bias": False,
    "final_logit_softcap": 0.0,
    "attn_logit_softcap": 0.0,
    "attention_scale": 0.0,
    "sliding_window": 0,
    "sliding_window_pattern": 0,
    "init_std": 0.02,
    # Mixture-of-experts and OLMoE keys: read so lathe's model.json loads, but this reference models
    # dense layers only (moe_experts must be 0, qk_norm_full_width false).
    "qk_norm_full_width": False,
    "moe_experts": 0,
    "moe_top_k": 2,
    "moe_ffn_dim": 0,
    "moe_router_scoring": "softmax",
    "moe_renormalize": True,
    "moe_routed_scaling": 1.0,
    "moe_shared_ffn_dim": 0,
    "moe_shared_gate": False,
    "moe_first_dense_layers": 0,
    "moe_layer_step": 1,
    "moe_dense_layers": "",
    "moe_aux_loss_coef": 0.001,
    "moe_z_loss_coef": 0.0,
    # DeepSeek keys (latent attention, YaRN, interleaved RoPE, group routing, selection bias,
    # multi-token prediction): read so lathe's model.json loads; this reference has none of them
    # (kv_lora_rank, mtp_layers and moe_bias_update_rate must be 0, rope_interleave false).
    "rope_yarn_beta_fast": 32.0,
    "rope_yarn_beta_slow": 1.0,
    "rope_yarn_truncate": True,
    "rope_yarn_mscale": 0.0,
    "rope_yarn_mscale_all_dim": 0.0,
    "rope_attention_factor": 0.0,
    "rope_interleave": False,
    "moe_bias_update_rate": 0.0,
    "moe_groups": 1,
    "moe_topk_groups": 1,
    "moe_group_score_experts": 2,
    "q_lora_rank": 0,
    "kv_lora_rank": 0,
    "qk_nope_head_dim": 0,
    "qk_rope_head_dim": 0,
    "v_head_dim": 0,
    "mtp_layers": 0,
    "mtp_loss_weight": 0.0,
    # Gemma 4 keys (models/gemma4_layer.h): read so lathe's model.json loads; this reference has none
    # of them (all must keep these values).
    "rope_local_plain": False,
    "global_head_dim": 0,
    "global_kv_heads": 0,
    "attention_k_eq_v": False,
    "value_norm": False,
    "kv_shared_layers": 0,
    "double_wide_mlp": False,
    "per_layer_input_dim": 0,
    "per_layer_input_vocab": 0,
    # Linear-attention keys (models/qwen3_next_layer.h): read so lathe's model.json loads; this
    # reference has no linear-attention layer (all must keep these values).
    "layer_types": "",
    "full_attention_interval": 0,
    "linear_key_heads": 0,
    "linear_value_heads": 0,
    "linear_key_head_dim": 0,
    "linear_value_head_dim": 0,
    "linear_conv_kernel": 4,
    "attention_output_gate": False,
    # Mamba-2 keys (models/mamba2_layer.h): read so lathe's model.json loads; this reference has no
    # state-space layer (ssm_state_size must be 0; the others then change nothing).
    "ssm_state_size": 0,
    "ssm_groups": 1,
    "ssm_conv_kernel": 4,
    "ssm_conv_bias": True,
    "ssm_projection_bias": False,
    "ssm_chunk_size": 256,
    "ssm_dt_min": 0.0,
    "ssm_dt_max": 0.0,
    "ssm_dt_init_min": 0.001,
    "ssm_dt_init_max": 0.1,
    "ssm_dt_init_floor": 1e-4,
    "residual_in_fp32": True,
}
GEMMA4_KEYS = ("rope_local_plain", "global_head_dim", "global_kv_heads", "attention_k_eq_v", "value_norm",
               "kv_shared_layers", "double_wide_mlp", "per_layer_input_dim", "per_layer_input_vocab")
LINEAR_ATTENTION_KEYS = ("layer_types", "full_attention_interval", "attention_output_gate")


class ModelConfig:
    """ModelConfig as a plain object: ModelConfig(dict) fills defaults and validates."""

    def __init__(self, values=None, source="model config"):
        values = dict(values or {})
        unknown = sorted(set(values) - set(MODEL_CONFIG_DEFAULTS))
        if unknown:
            raise ValueError(f"{source}: unknown key '{unknown[0]}' (expected ModelConfig fields)")
        for key, default in MODEL_CONFIG_DEFAULTS.items():
            value = values.get(key, default)
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"{source}: {key} is {value!r}, expected true or false")
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{source}: {key} is {value!r}, expected an integer")
            elif isinstance(default, float):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"{source}: {key} is {value!r}, expected a number")
                value = float(value)
            setattr(self, key, value)
        if self.kv_lora_rank != 0 or self.mtp_layers != 0 or self.rope_interleave:
            raise ValueError(f"{source}: the PyTorch reference has no latent attention, multi-token prediction or "
                             f"interleaved RoPE (kv_lora_rank {self.kv_lora_rank}, mtp_layers {self.mtp_layers}, "
                             f"rope_interleave {self.rope_interleave})")
        for key in GEMMA4_KEYS:
            if getattr(self, key) != MODEL_CONFIG_DEFAULTS[key]:
                raise ValueError(f"{source}: the PyTorch reference has no Gemma 4 mechanisms ({key} is "
                                 f"{getattr(self, key)!r})")
        for key in LINEAR_ATTENTION_KEYS:
            if getattr(self, key) != MODEL_CONFIG_DEFAULTS[key]:
                raise ValueError(f"{source}: the PyTorch reference has no linear-attention layers or gated "
                                 f"attention ({key} is {getattr(self, key)!r})")
        if self.ssm_state_size != 0:
            raise ValueError(f"{source}: the PyTorch reference has no Mamba-2 layer (ssm_state_size "
                             f"{self.ssm_state_size})")
        if self.moe_experts != 0 or self.qk_norm_full_width:
            raise ValueError(f"{source}: the PyTorch reference models dense layers with per-head q/k norms only "
                             f"(moe_experts {self.moe_experts}, qk_norm_full_width {self.qk_norm_full_width})")
        if self.ffn_activation not in ("silu", "gelu_tanh"):
            raise ValueError(f"{source}: ffn_activation is {self.ffn_activation!r}, expected silu or gelu_tanh")
        if self.rope_scaling not in ("none", "llama3"):
            raise ValueError(f"{source}: rope_scaling is {self.rope_scaling!r}, expected none or llama3")
        for key in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{source}: {key} is {getattr(self, key)}, expected > 0")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{source}: n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.head_dim == 0 and self.d_model % self.n_heads:
            raise ValueError(f"{source}: d_model {self.d_model} is not a multiple of n_heads {self.n_heads} (set head_dim)")

    @staticmethod
    def from_json_file(path):
        with open(path) as file:
            values = json.load(file)
        if isinstance(values.get("model"), dict):  # a whole TrainConfig: take its model section
            values = values["model"]
        return ModelConfig(values, source=path)

    def to_dict(self):
        return {key: getattr(self, key) for key in MODEL_CONFIG_DEFAULTS}

    @property
    def resolved_head_dim(self):
        return self.head_dim if self.head_dim > 0 else self.d_model // self.n_heads

    @property
    def rotary_dim(self):
        return int(math.floor(self.resolved_head_dim * self.partial_rotary_factor / 2)) * 2

    def layer_is_local(self, layer):
        return self.sliding_window > 0 and (
            self.sliding_window_pattern == 0 or (layer + 1) % self.sliding_window_pattern != 0
        )


def parameter_shapes(config):
    """{HF name: shape} in model_config.h order."""
    d, hd, ffn = config.d_model, config.resolved_head_dim, config.ffn_dim
    shapes = {"model.embed_tokens.weight": (config.vocab_size, d)}
    for i in range(config.n_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (d,)
        shapes[p + "self_attn.q_proj.weight"] = (config.n_heads * hd, d)
        shapes[p + "self_attn.k_proj.weight"] = (config.n_kv_heads * hd, d)
        shapes[p + "self_attn.v_proj.weight"] = (config.n_kv_heads * hd, d)
        if config.attention_bias:  # Qwen2: biases on the q, k, v projections
            shapes[p + "self_attn.q_proj.bias"] = (config.n_heads * hd,)
            shapes[p + "self_attn.k_proj.bias"] = (config.n_kv_heads * hd,)
            shapes[p + "self_attn.v_proj.bias"] = (config.n_kv_heads * hd,)
        shapes[p + "self_attn.o_proj.weight"] = (d, config.n_heads * hd)
        if config.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (hd,)
            shapes[p + "self_attn.k_norm.weight"] = (hd,)
        shapes[p + "post_attention_layernorm.weight"] = (d,)
        if config.sandwich_norms:
            shapes[p + "pre_feedforward_layernorm.weight"] = (d,)
            shapes[p + "post_feedforward_layernorm.weight"] = (d,)
        shapes[p + "mlp.gate_proj.weight"] = (ffn, d)
        shapes[p + "mlp.up_proj.weight"] = (ffn, d)
        shapes[p + "mlp.down_proj.weight"] = (d, ffn)
    shapes["model.norm.weight"] = (d,)
    if not config.tie_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, d)
    return shapes


def rope_inverse_frequencies(config, theta):
    """(rotary_dim / 2) float64: theta^(-2j / rotary_dim), then llama3 scaling if configured."""
    rotary_dim = config.rotary_dim
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim
    inverse = 1.0 / (theta**exponents)
    if config.rope_scaling == "llama3":
        # Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a smooth blend between.
        factor, low, high = config.rope_scaling_factor, config.rope_low_freq_factor, config.rope_high_freq_factor
        old_context = config.rope_original_max_position
        low_freq_wavelength, high_freq_wavelength = old_context / low, old_context / high
        wavelength = 2 * math.pi / inverse
        scaled = torch.where(wavelength > low_freq_wavelength, inverse / factor, inverse)
        smooth = (old_context / wavelength - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelength >= high_freq_wavelength) & (wavelength <= low_freq_wavelength)
        inverse = torch.where(medium, blended, scaled)
    return inverse


def rope_cos_sin(config, theta, seq_len, dtype):
    """cos, sin: (seq_len, rotary_dim), angles computed in float64 for positions 0..seq_len-1."""
    positions = torch.arange(seq_len, dtype=torch.float64)
    angles = torch.outer(positions, rope_inverse_frequencies(config, theta))
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, cos, sin, rotary_dim):
    """x: (B, T, heads, head_dim); rotate-half on the first rotary_dim dims, the rest passes."""
    if rotary_dim == 0:
        return x
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    first, second = rotated[..., : rotary_dim // 2], rotated[..., rotary_dim // 2 :]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    rotated = rotated * cos + torch.cat([-second, first], dim=-1) * sin
    return torch.cat([rotated, passed], dim=-1)


def rms_norm(x, weight, eps, offset):
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    normalized = xc * torch.rsqrt(xc.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normalized * (weight.to(compute) + offset)).to(x.dtype)


def softcap(x, cap):
    return cap * torch.tanh(x / cap) if cap > 0 else x


def _has_sdpa():
    return hasattr(F, "scaled_dot_product_attention")


class Decoder(torch.nn.Module):
    """The decoder. Parameters are in self.parameters_by_name ({HF name: nn.Parameter})."""

    def __init__(self, config, dtype=torch.float32, attention="reference"):
        super().__init__()
        if attention not in ("reference", "sdpa"):
            raise ValueError(f"attention is {attention!r}, expected reference or sdpa")
        self.config, self.dtype, self.attention = config, dtype, attention
        self.parameters_by_name = {}
        for name, shape in parameter_shapes(config).items():
            parameter = torch.nn.Parameter(torch.empty(shape, dtype=dtype))
            self.register_parameter(name.replace(".", "__"), parameter)
            self.parameters_by_name[name] = parameter
        self.initialize(seed=0)

    def initialize(self, seed):
        """normal(0, init_std) for matrices; biases 0; norms 1 (0 with norm_weight_offset 1)."""
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, parameter in self.parameters_by_name.items():
                if parameter.dim() == 2:
                    values = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
                    parameter.copy_(values * self.config.init_std)
                elif name.endswith(".bias"):
                    parameter.fill_(0.0)  # as lathe and transformers start projection biases
                else:
                    parameter.fill_(1.0 - self.config.norm_weight_offset)

    def load_tensors(self, tensors, source="weights"):
        """Copies {HF name: tensor}; every parameter must be present with its shape, nothing extra."""
        expected = self.parameters_by_name
        for name in tensors:
            if name not in expected:
                raise ValueError(f"{source}: unexpected tensor '{name}' for this config")
        with torch.no_grad():
            for name, parameter in expected.items():
                if name not in tensors:
                    raise ValueError(f"{source}: missing tensor '{name}'")
                if tuple(tensors[name].shape) != tuple(parameter.shape):
                    raise ValueError(
                        f"{source}: tensor '{name}' has shape {tuple(tensors[name].shape)}, expected {tuple(parameter.shape)}"
                    )
                parameter.copy_(tensors[name].to(self.dtype))

    def weight(self, name):
        return self.parameters_by_name[name]

    def attend(self, q, k, v, layer):
        """q: (B, T, H, hd), k, v: (B, T, KV, hd) -> (B, T, H * hd)."""
        config = self.config
        batch, seq_len, heads, head_dim = q.shape
        group = heads // config.n_kv_heads
        scale = config.attention_scale if config.attention_scale > 0 else 1.0 / math.sqrt(head_dim)
        local = config.layer_is_local(layer)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, hd)
        k = k.repeat_interleave(group, dim=1)  # query head h uses kv head h // group
        v = v.repeat_interleave(group, dim=1)
        query_position = torch.arange(seq_len)[:, None]
        key_position = torch.arange(seq_len)[None, :]
        allowed = key_position <= query_position
        if local:
            allowed = allowed & (key_position > query_position - config.sliding_window)
        if self.attention == "sdpa" and _has_sdpa() and config.attn_logit_softcap == 0:
            # Pre-scaling q instead of the `scale` argument keeps this working on torch 2.0.
            q = q * (scale * math.sqrt(head_dim))
            if local:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            else:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) * scale
            scores = softcap(scores, config.attn_logit_softcap)
            scores = scores.masked_fill(~allowed, float("-inf"))
            probabilities = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1)
            out = torch.matmul(probabilities.to(v.dtype), v)
        return out.transpose(1, 2).reshape(batch, seq_len, heads * head_dim)

    def forward(self, ids):
        """ids: (B, T) int64 -> logits (B, T, vocab_size)."""
        config, w = self.config, self.weight
        batch, seq_len = ids.shape
        eps, offset = config.norm_eps, config.norm_weight_offset
        head_dim, rotary_dim = config.resolved_head_dim, config.rotary_dim
        scale = math.sqrt(config.d_model) if config.embedding_scale == 0 else config.embedding_scale
        h = F.embedding(ids, w("model.embed_tokens.weight")) * scale
        global_rope = rope_cos_sin(config, config.rope_theta, seq_len, self.dtype)
        local_theta = config.rope_local_theta if config.rope_local_theta > 0 else config.rope_theta
        local_rope = rope_cos_sin(config, local_theta, seq_len, self.dtype)
        activation = F.silu if config.ffn_activation == "silu" else (lambda x: F.gelu(x, approximate="tanh"))
        for i in range(config.n_layers):
            p = f"model.layers.{i}."
            x = rms_norm(h, w(p + "input_layernorm.weight"), eps, offset)
            def bias(name):
                return w(p + f"self_attn.{name}.bias") if config.attention_bias else None

            q = F.linear(x, w(p + "self_attn.q_proj.weight"), bias("q_proj")).view(batch, seq_len, config.n_heads, head_dim)
            k = F.linear(x, w(p + "self_attn.k_proj.weight"), bias("k_proj")).view(batch, seq_len, config.n_kv_heads, head_dim)
            v = F.linear(x, w(p + "self_attn.v_proj.weight"), bias("v_proj")).view(batch, seq_len, config.n_kv_heads, head_dim)
            if config.qk_norm:
                q = rms_norm(q, w(p + "self_attn.q_norm.weight"), eps, offset)
                k = rms_norm(k, w(p + "self_attn.k_norm.weight"), eps, offset)
            cos, sin = local_rope if config.layer_is_local(i) else global_rope
            q, k = apply_rope(q, cos, sin, rotary_dim), apply_rope(k, cos, sin, rotary_dim)
            o = F.linear(self.attend(q, k, v, i), w(p + "self_attn.o_proj.weight"))
            if config.sandwich_norms:
                h = h + rms_norm(o, w(p + "post_attention_layernorm.weight"), eps, offset)
                x = rms_norm(h, w(p + "pre_feedforward_layernorm.weight"), eps, offset)
            else:
                h = h + o
                x = rms_norm(h, w(p + "post_attention_layernorm.weight"), eps, offset)
            gate = F.linear(x, w(p + "mlp.gate_proj.weight"))
            up = F.linear(x, w(p + "mlp.up_proj.weight"))
            m = F.linear(activation(gate) * up, w(p + "mlp.down_proj.weight"))
            if config.sandwich_norms:
                m = rms_norm(m, w(p + "post_feedforward_layernorm.weight"), eps, offset)
            h = h + m
        h = rms_norm(h, w("model.norm.weight"), eps, offset)
        output_weight = w("model.embed_tokens.weight") if config.tie_embeddings else w("lm_head.weight")
        return softcap(F.linear(h, output_weight), config.final_logit_softcap)

    def loss(self, ids, targets, return_logits=False):
        """Mean cross-entropy over all B * T tokens (computed in float32 or wider)."""
        logits = self.forward(ids)
        compute = torch.promote_types(logits.dtype, torch.float32)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).to(compute), targets.reshape(-1))
        return (loss, logits) if return_logits else loss
