// Attention problems: causal multi-head (Llama-3.2-1B), GQA (Llama-3-8B), sliding window
// (Mistral-7B), logit softcap (Gemma-2), MLA (DeepSeek-V3) and decode over a paged KV cache (vLLM
// layout). Layout (batch, seq, heads, head_dim) as Hugging Face.
//   lathe: flash_attention, as its own registered problem (suite_op_problem.h) for the plain
//          attention problems (MLA: matmul up-projections + flash_attention with v of its own width;
//          paged decode: plain gather of the pages + flash_attention per sequence).
//   vendor: the unfused composition a BLAS user writes: per head, S = Q K^T with the GEMM vendor's
//          sgemm, masking and softmax in plain loops, O = P V with sgemm (the full score matrix).
#include <cmath>
#include <cstring>

#include "lathe/bench/suite/suite_common.h"
#include "lathe/bench/suite/suite_op_problem.h"
#include "lathe/bench/suite/suite_problem.h"
#include "lathe/bench/suite/suite_reference.h"
#include "lathe/bench/suite/suite_vendor.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe {
namespace {

// Visible (query, key) pairs, for the FLOP count (causal halves the work, as FlashAttention counts).
double visible_pairs(int64_t seq_q, int64_t seq_k, bool causal, int64_t window) {
  double pairs = 0;
  for (int64_t i = 0; i < seq_q; ++i) {
    int64_t aligned = i + seq_k - seq_q;
    int64_t last = causal ? std::min(aligned, seq_k - 1) : seq_k - 1;
    int64_t first = window > 0 ? std::max<int64_t>(0, aligned - window + 1) : 0;
    pairs += std::max<int64_t>(0, last - first + 1);
  }
  return pairs;
}

// The vendor composition: per (batch, head) two sgemms around a plain masked softmax. With lse
// (batch, heads, seq_q), also each row's logsumexp (-inf for a row with no visible key).
void vendor_attention(GemmVendor vendor, const float* q, const float* k, const float* v, float* o, int64_t batch,
                      int64_t seq_q, int64_t seq_k, int64_t heads, int64_t kv_heads, int64_t dim_qk, int64_t dim_v,
                      float scale, bool causal, int64_t window, float softcap, float* scores, float* lse = nullptr) {
  int64_t group = heads / kv_heads;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q + (b * seq_q * heads + h) * dim_qk;
      const float* kh = k + (b * seq_k * kv_heads + h / group) * dim_qk;
      const float* vh = v + (b * seq_k * kv_heads + h / group) * dim_v;
      vendor_sgemm(vendor, true, seq_q, seq_k, dim_qk, scale, qh, heads * dim_qk, kh, kv_heads * dim_qk, 0.0f, scores,
                   seq_k);
      parallel_for(seq_q, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* row = scores + i * seq_k;
          int64_t aligned = i + seq_k - seq_q;
          int64_t last = causal ? std::min(aligned, seq_k - 1) : seq_k - 1;
          int64_t first = window > 0 ? std::max<int64_t>(0, aligned - window + 1) : 0;
          float max_value = -INFINITY;
          for (int64_t j = first; j <= last; ++j) {
            if (softcap > 0) row[j] = softcap * std::tanh(row[j] / softcap);
            max_value = std::max(max_value, row[j]);
          }
          float total = 0;
          for (int64_t j = first; j <= last; ++j) total += row[j] = std::exp(row[j] - max_value);
          for (int64_t j = 0; j < seq_k; ++j) row[j] = (j >= first && j <= last) ? row[j] / total : 0.0f;
          if (lse) lse[(b * heads + h) * seq_q + i] = last >= first ? max_value + std::log(total) : -INFINITY;
        }
      });
      vendor_sgemm(vendor, false, seq_q, dim_v, seq_k, 1.0f, scores, seq_k, vh, kv_heads * dim_v, 0.0f,
                   o + (b * seq_q * heads + h) * dim_v, heads * dim_v);
    }
}

// The vendor baseline of the plain attention problems (flash_attention's own problem): the
// composition above on the op problem's q, k, v into its o; lse is the row's logsumexp, which the
// composition's softmax has at hand (a plain loop over the score row, as FlashAttention returns it).
OpSuiteProblem::VendorPath attention_vendor() {
  auto scores = std::make_shared<Tensor>();
  return [scores](OpProblem& problem) {
    const auto& args = op_problem_args<FlashAttentionArgs, FlashAttentionCpuConfig>(problem);
    int64_t batch = args.q.dim(0), seq_q = args.q.dim(1), heads = args.q.dim(2), dim = args.q.dim(3);
    int64_t seq_k = args.k.dim(1), kv_heads = args.k.dim(2);
    if (!scores->defined() || scores->numel() < seq_q * seq_k) *scores = Tensor::empty({seq_q, seq_k}, DType::f32);
    vendor_attention(best_gemm_vendor(), args.q.ptr<float>(), args.k.ptr<float>(), args.v.ptr<float>(),
                     args.o.ptr<float>(), batch, seq_q, seq_k, heads, kv_heads, dim, dim,
                     attention_scale(args.options, dim), args.options.causal, args.options.window, args.options.softcap,
                     scores->ptr<float>(), args.lse.ptr<float>());
  };
}

// Multi-head latent attention (DeepSeek-V3, prefill form): keys and values are up-projected from a
// shared low-rank latent c_kv; every head's key is [k_nope_h, k_rope] with k_rope shared by all
// heads (RoPE already applied to q_rope and k_rope, as the inputs of this problem).
//   k_nope = c_kv @ w_uk (T, heads * nope),  v = c_kv @ w_uv (T, heads * dim_v)
//   o_h = softmax(scale * [q_nope_h, q_rope_h] . [k_nope_h, k_rope]^T, causal) v_h
struct MlaShape {
  int64_t seq, heads, kv_rank, nope, rope, dim_v;
};

class MlaProblem : public SuiteProblemWithReference<MlaProblem> {
 public:
  MlaProblem(SuiteInfo info, const MlaShape& shape)
      : SuiteProblemWithReference(std::move(info),
                                  str_cat("seq=", shape.seq, ",heads=", shape.heads, ",kv_rank=", shape.kv_rank,
                                          ",qk_nope=", shape.nope, ",qk_rope=", shape.rope, ",v_dim=", shape.dim_v)),
        s_(shape) {
    double bound = 1.0 / std::sqrt(static_cast<double>(s_.kv_rank));
    add_input("q_nope", {s_.seq, s_.heads, s_.nope});
    add_input("q_rope", {s_.seq, s_.heads, s_.rope});
    add_input("c_kv", {s_.seq, s_.kv_rank});
    add_input("k_rope", {s_.seq, s_.rope});
    add_input("w_uk", {s_.kv_rank, s_.heads * s_.nope}, DType::f32, -bound, bound);
    add_input("w_uv", {s_.kv_rank, s_.heads * s_.dim_v}, DType::f32, -bound, bound);
    add_output("o", {s_.seq, s_.heads, s_.dim_v});
    int64_t width = qk_dim();
    k_nope_ = Tensor::empty({s_.seq, s_.heads * s_.nope}, DType::f32);
    v_up_ = Tensor::empty({s_.seq, s_.heads * s_.dim_v}, DType::f32);
    q_ = Tensor::empty({1, s_.seq, s_.heads, width}, DType::f32);
    k_ = Tensor::empty({1, s_.seq, s_.heads, width}, DType::f32);
    lse_ = Tensor::empty({1, s_.heads, s_.seq}, DType::f32);
    mutable_info().lathe_path = "matmul (k, v up-projections) + plain concat + flash_attention (v_head_dim of its own)";
    if (best_gemm_vendor() != GemmVendor::none) {
      scores_ = Tensor::empty({s_.seq, s_.seq}, DType::f32);
      mutable_info().vendor = str_cat(gemm_vendor_name(best_gemm_vendor()),
                                      " sgemm up-projections + per-head sgemm attention with plain softmax");
    }
  }

  OpCost cost() const override {
    double pairs = visible_pairs(s_.seq, s_.seq, true, 0);
    double projections = 2.0 * s_.seq * s_.kv_rank * s_.heads * (s_.nope + s_.dim_v);
    return {projections + 2.0 * s_.heads * pairs * (qk_dim() + s_.dim_v), io_bytes()};
  }

  void run_lathe() override {
    up_project([](const TensorView& a, const TensorView& b, const TensorView& c) {
      MatmulArgs args;
      args.a = a, args.b = b, args.c = c;
      matmul(args);
    });
    assemble();
    // v straight from the up-projection, o straight into the output: (1, seq, heads, dim_v).
    FlashAttentionArgs args;
    args.q = q_.view(), args.k = k_.view();
    args.v = v_up_.view().reshape({1, s_.seq, s_.heads, s_.dim_v});
    args.o = out(0).reshape({1, s_.seq, s_.heads, s_.dim_v});
    args.lse = lse_.view();
    args.options.causal = true;
    flash_attention(args);
  }

  void run_vendor() override {
    GemmVendor vendor = best_gemm_vendor();
    up_project([&](const TensorView& a, const TensorView& b, const TensorView& c) {
      vendor_sgemm(vendor, false, a.dim(0), b.dim(1), a.dim(1), 1.0f, static_cast<const float*>(a.data), a.dim(1),
                   static_cast<const float*>(b.data), b.dim(1), 0.0f, static_cast<float*>(c.data), c.dim(1));
    });
    assemble();
    vendor_attention(vendor, q_.ptr<float>(), k_.ptr<float>(), v_up_.ptr<float>(), out_f32(0), 1, s_.seq, s_.seq,
                     s_.heads, s_.heads, qk_dim(), s_.dim_v, scale(), true, 0, 0, scores_.ptr<float>());
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    int64_t width = qk_dim();
    std::vector<T> k_nope(s_.seq * s_.heads * s_.nope), v(s_.seq * s_.heads * s_.dim_v);
    suite_reference::matmul(io.in(2).data(), io.in(4).data(), k_nope.data(), s_.seq, s_.heads * s_.nope, s_.kv_rank,
                            false);
    suite_reference::matmul(io.in(2).data(), io.in(5).data(), v.data(), s_.seq, s_.heads * s_.dim_v, s_.kv_rank, false);
    std::vector<T> q(s_.seq * s_.heads * width), k(s_.seq * s_.heads * width);
    for (int64_t t = 0; t < s_.seq; ++t)
      for (int64_t h = 0; h < s_.heads; ++h) {
        T* qi = &q[(t * s_.heads + h) * width];
        T* ki = &k[(t * s_.heads + h) * width];
        for (int64_t d = 0; d < s_.nope; ++d) {
          qi[d] = io.in(0)[(t * s_.heads + h) * s_.nope + d];
          ki[d] = k_nope[(t * s_.heads + h) * s_.nope + d];
        }
        for (int64_t d = 0; d < s_.rope; ++d) {
          qi[s_.nope + d] = io.in(1)[(t * s_.heads + h) * s_.rope + d];
          ki[s_.nope + d] = io.in(3)[t * s_.rope + d];
        }
      }
    suite_reference::attention<T>(q.data(), k.data(), v.data(), io.out(0).data(), 1, s_.seq, s_.seq, s_.heads, s_.heads,
                                  width, s_.dim_v, static_cast<T>(scale()), true);
  }

 private:
  int64_t qk_dim() const { return s_.nope + s_.rope; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(qk_dim())); }

  template <class Gemm>
  void up_project(Gemm&& gemm) {
    gemm(in(2), in(4), k_nope_.view());
    gemm(in(2), in(5), v_up_.view());
  }

  // q = [q_nope, q_rope], k = [k_nope, k_rope] per head.
  void assemble() {
    int64_t width = qk_dim();
    const float *q_nope = in_f32(0), *q_rope = in_f32(1), *k_rope = in_f32(3);
    const float* k_nope = k_nope_.ptr<float>();
    float *q = q_.ptr<float>(), *k = k_.ptr<float>();
    parallel_for(s_.seq, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        for (int64_t h = 0; h < s_.heads; ++h) {
          int64_t row = t * s_.heads + h;
          std::memcpy(q + row * width, q_nope + row * s_.nope, sizeof(float) * s_.nope);
          std::memcpy(q + row * width + s_.nope, q_rope + row * s_.rope, sizeof(float) * s_.rope);
          std::memcpy(k + row * width, k_nope + row * s_.nope, sizeof(float) * s_.nope);
          std::memcpy(k + row * width + s_.nope, k_rope + t * s_.rope, sizeof(float) * s_.rope);
        }
    });
  }

  MlaShape s_;
  Tensor k_nope_, v_up_, q_, k_, lse_, scores_;
};

// Decode attention over a paged KV cache (vLLM layout): each sequence has one new query token and
// a context of context_lens[b] tokens stored in pages of page_size tokens, listed in block_table.
struct PagedShape {
  int64_t sequences, heads, kv_heads, dim, page_size, max_context, min_context;
};

class PagedDecodeProblem : public SuiteProblemWithReference<PagedDecodeProblem> {
 public:
  PagedDecodeProblem(SuiteInfo info, const PagedShape& shape)
      : SuiteProblemWithReference(
            std::move(info), str_cat("sequences=", shape.sequences, ",heads=", shape.heads,
                                     ",kv_heads=", shape.kv_heads, ",head_dim=", shape.dim, ",page=", shape.page_size,
                                     ",context=", shape.min_context, "..", shape.max_context)),
        s_(shape) {
    pages_per_sequence_ = (s_.max_context + s_.page_size - 1) / s_.page_size;
    int64_t pages = s_.sequences * pages_per_sequence_;
    add_input("q", {s_.sequences, s_.heads, s_.dim});
    add_input("k_cache", {pages, s_.page_size, s_.kv_heads, s_.dim});
    add_input("v_cache", {pages, s_.page_size, s_.kv_heads, s_.dim});
    add_input("block_table", {s_.sequences, pages_per_sequence_}, DType::i32, 0, 1);
    add_input("context_lens", {s_.sequences}, DType::i32, 0, 1);
    add_output("o", {s_.sequences, s_.heads, s_.dim});
    k_gathered_ = Tensor::empty({1, s_.max_context, s_.kv_heads, s_.dim}, DType::f32);
    v_gathered_ = Tensor::empty({1, s_.max_context, s_.kv_heads, s_.dim}, DType::f32);
    lse_ = Tensor::empty({1, s_.heads, 1}, DType::f32);
    mutable_info().lathe_path = "plain page gather + flash_attention per sequence";
  }

  // Context lengths uniform in [min_context, max_context]; pages a seeded permutation of the cache.
  void fill_inputs(uint64_t seed) override {
    SuiteProblem::fill_inputs(seed);
    int64_t pages = s_.sequences * pages_per_sequence_;
    std::vector<int32_t> permutation(pages);
    for (int64_t i = 0; i < pages; ++i) permutation[i] = static_cast<int32_t>(i);
    for (int64_t i = pages - 1; i > 0; --i)
      std::swap(permutation[i], permutation[static_cast<int64_t>(uniform_at(seed, 77, i) * (i + 1))]);
    int32_t* table = inputs()[3].ptr<int32_t>();
    for (int64_t i = 0; i < pages; ++i) table[i] = permutation[i];
    int32_t* lens = inputs()[4].ptr<int32_t>();
    for (int64_t b = 0; b < s_.sequences; ++b)
      lens[b] = static_cast<int32_t>(s_.min_context + uniform_at(seed, 78, b) *
                                                          static_cast<double>(s_.max_context - s_.min_context + 1));
    total_context_ = 0;
    for (int64_t b = 0; b < s_.sequences; ++b) total_context_ += lens[b];
  }

  OpCost cost() const override {
    double context = total_context_ > 0 ? total_context_ : s_.sequences * (s_.min_context + s_.max_context) / 2.0;
    double kv_bytes = 2.0 * context * s_.kv_heads * s_.dim * 4;
    return {4.0 * s_.heads * s_.dim * context, kv_bytes + 2.0 * s_.sequences * s_.heads * s_.dim * 4};
  }

  void run_lathe() override {
    const int32_t* table = inputs()[3].ptr<int32_t>();
    const int32_t* lens = inputs()[4].ptr<int32_t>();
    int64_t token_floats = s_.kv_heads * s_.dim;
    for (int64_t b = 0; b < s_.sequences; ++b) {
      int64_t length = lens[b];
      float *k = k_gathered_.ptr<float>(), *v = v_gathered_.ptr<float>();
      int64_t page_count = (length + s_.page_size - 1) / s_.page_size;
      parallel_for(page_count, 1, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          int64_t page = table[b * pages_per_sequence_ + p];
          int64_t tokens = std::min(s_.page_size, length - p * s_.page_size);
          size_t bytes = sizeof(float) * tokens * token_floats;
          std::memcpy(k + p * s_.page_size * token_floats, in_f32(1) + page * s_.page_size * token_floats, bytes);
          std::memcpy(v + p * s_.page_size * token_floats, in_f32(2) + page * s_.page_size * token_floats, bytes);
        }
      });
      FlashAttentionArgs args;
      args.q = in(0).slice(0, b, b + 1).reshape({1, 1, s_.heads, s_.dim});
      args.k = k_gathered_.view().slice(1, 0, length);
      args.v = v_gathered_.view().slice(1, 0, length);
      args.o = out(0).slice(0, b, b + 1).reshape({1, 1, s_.heads, s_.dim});
      args.lse = lse_.view();
      flash_attention(args);
    }
  }

  // Each sequence's pages gathered in plain loops, then flash_attention's reference over its context.
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &q = io.in(0), &k_cache = io.in(1), &v_cache = io.in(2), &table = io.in(3), &lens = io.in(4);
    int64_t token_values = s_.kv_heads * s_.dim;
    parallel_for(s_.sequences, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        int64_t length = static_cast<int64_t>(lens[b]);
        std::vector<T> k(length * token_values), v(length * token_values), lse(s_.heads);
        for (int64_t position = 0; position < length; ++position) {
          int64_t page = static_cast<int64_t>(table[b * pages_per_sequence_ + position / s_.page_size]);
          int64_t offset = (page * s_.page_size + position % s_.page_size) * token_values;
          std::copy(&k_cache[offset], &k_cache[offset] + token_values, &k[position * token_values]);
          std::copy(&v_cache[offset], &v_cache[offset] + token_values, &v[position * token_values]);
        }
        FlashAttentionArgs args;
        args.q = suite_reference::view_of(&q[b * s_.heads * s_.dim], {1, 1, s_.heads, s_.dim});
        args.k = suite_reference::view_of(k.data(), {1, length, s_.kv_heads, s_.dim});
        args.v = suite_reference::view_of(v.data(), {1, length, s_.kv_heads, s_.dim});
        args.o = suite_reference::view_of(&io.out(0)[b * s_.heads * s_.dim], {1, 1, s_.heads, s_.dim});
        args.lse = suite_reference::view_of(lse.data(), {1, s_.heads, 1});
        flash_attention_reference<T>(args);
      }
    });
  }

 private:
  PagedShape s_;
  int64_t pages_per_sequence_ = 0;
  double total_context_ = 0;
  Tensor k_gathered_, v_gathered_, lse_;
};

// flash_attention's own problem at a shape, with the sgemm composition as the vendor baseline.
void add_attention_problem(std::vector<SuiteEntry>& entries, SuiteInfo info, const std::string& full,
                           const std::string& quick) {
  if (best_gemm_vendor() != GemmVendor::none)
    info.vendor = str_cat(gemm_vendor_name(best_gemm_vendor()), " sgemm QK^T and PV per head + plain masked softmax");
  // q, k, v as a lab candidate receives them (`lathe lab`, `lathe optimize`'s attention family).
  auto inputs = [](OpProblem& problem) -> std::vector<std::pair<std::string, TensorView>> {
    const auto& args = op_problem_args<FlashAttentionArgs, FlashAttentionCpuConfig>(problem);
    return {{"q", args.q}, {"k", args.k}, {"v", args.v}};
  };
  add_op_suite_problem(entries, info, "flash_attention", full, quick, attention_vendor(), inputs);
}

}  // namespace

void register_attention_problems(std::vector<SuiteEntry>& entries) {
  add_attention_problem(entries,
                        llm_info("mha_causal_attention", "causal multi-head flash attention",
                                 "Llama-3.2-1B attention (32 heads x 64) scaled to 8 heads, 1024 tokens"),
                        "batch=1,seq=1024,heads=8,kv_heads=8,head_dim=64,causal=1",
                        "batch=1,seq=19,heads=2,kv_heads=2,head_dim=16,causal=1");
  add_attention_problem(entries,
                        llm_info("gqa_attention", "causal grouped-query attention (4 query heads per KV head)",
                                 "Llama-3-8B (32 query / 8 KV heads x 128) scaled to 8 / 2 heads x 64, 1024 tokens"),
                        "batch=1,seq=1024,heads=8,kv_heads=2,head_dim=64,causal=1",
                        "batch=1,seq=21,heads=4,kv_heads=1,head_dim=16,causal=1");
  add_attention_problem(entries,
                        llm_info("sliding_window_attention", "causal sliding-window attention, GQA",
                                 "Mistral-7B (window 4096, 32 / 8 heads x 128) scaled to window 256, 8 / 2 heads, "
                                 "1024 tokens"),
                        "batch=1,seq=1024,heads=8,kv_heads=2,head_dim=128,causal=1,window=256",
                        "batch=1,seq=33,heads=4,kv_heads=2,head_dim=16,causal=1,window=8");
  add_attention_problem(entries,
                        llm_info("softcap_attention", "causal attention with tanh logit soft-capping (50)",
                                 "Gemma-2-2B (8 / 4 heads x 256, softcap 50), 512 tokens"),
                        "batch=1,seq=512,heads=8,kv_heads=4,head_dim=256,causal=1,softcap=50",
                        "batch=1,seq=17,heads=2,kv_heads=1,head_dim=24,causal=1,softcap=50");
  add_suite_problem<MlaProblem>(
      entries,
      llm_info("mla_attention", "multi-head latent attention (prefill): latent up-projection + attention",
               "DeepSeek-V3 (128 heads, kv_lora_rank 512, qk 128+64, v 128) scaled 1/4 in widths and "
               "1/16 in heads: 8 heads, rank 128, qk 32+16, v 32, 1024 tokens"),
      MlaShape{1024, 8, 128, 32, 16, 32}, MlaShape{13, 2, 12, 8, 4, 8});
  add_suite_problem<PagedDecodeProblem>(
      entries,
      llm_info("paged_decode_attention", "decode attention over a paged KV cache",
               "Llama-3-8B decode (32 / 8 heads x 128) scaled to 8 / 2 heads; 16 sequences of "
               "256-4096 tokens in 16-token pages (vLLM)"),
      PagedShape{16, 8, 2, 128, 16, 4096, 256}, PagedShape{3, 4, 2, 16, 4, 37, 5});
}

}  // namespace lathe
