// Memory-bound production ops: RMSNorm, RoPE (Llama-3 frequency scaling) and the AdamW step.
// lathe's paths are its optimized ops; oneDNN 2.6 has no RMSNorm, RoPE or AdamW, so there is no
// vendor row (bench/suite_torch.py times PyTorch's).
#include <cmath>
#include <cstring>

#include "lathe/bench/suite/suite_common.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/adamw/adamw.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "lathe/ops/rope/rope.h"

namespace lathe {
namespace {

// y = x / sqrt(mean(x^2) + 1e-5) * weight over the last axis.
struct RowsShape {
  int64_t rows, dim;
};

class RmsNormProblem : public SuiteProblemWithReference<RmsNormProblem> {
 public:
  RmsNormProblem(SuiteInfo info, const RowsShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("rows=", shape.rows, ",dim=", shape.dim)), s_(shape) {
    add_input("x", {s_.rows, s_.dim}, DType::f32, -2, 2);
    add_input("weight", {s_.dim}, DType::f32, 0.5, 1.5);
    add_output("y", {s_.rows, s_.dim});
    mutable_info().lathe_path = "rms_norm";
  }
  OpCost cost() const override { return {4.0 * s_.rows * s_.dim, io_bytes()}; }
  void run_lathe() override {
    RmsNormArgs args;
    args.x = in(0), args.weight = in(1), args.y = out(0), args.eps = 1e-5f;
    rms_norm(args);
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const auto &x = io.in(0), &weight = io.in(1);
    auto& y = io.out(0);
    parallel_for(s_.rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        T squares = 0;
        for (int64_t d = 0; d < s_.dim; ++d) squares += x[r * s_.dim + d] * x[r * s_.dim + d];
        T inverse = T(1) / std::sqrt(squares / static_cast<T>(s_.dim) + T(1e-5));
        for (int64_t d = 0; d < s_.dim; ++d) y[r * s_.dim + d] = x[r * s_.dim + d] * inverse * weight[d];
      }
    });
  }

 private:
  RowsShape s_;
};

// RoPE, rotate-half layout, positions 0..seq-1, theta 500000 with Llama-3 scaling (factor 8,
// low/high frequency factors 1/4, original context 8192), written independently of lathe's op.
struct RopeShape {
  int64_t seq, heads, head_dim;
};

class RopeProblem : public SuiteProblemWithReference<RopeProblem> {
 public:
  RopeProblem(SuiteInfo info, const RopeShape& shape)
      : SuiteProblemWithReference(std::move(info),
                                  str_cat("seq=", shape.seq, ",heads=", shape.heads, ",head_dim=", shape.head_dim)),
        s_(shape) {
    add_input("x", {1, s_.seq, s_.heads, s_.head_dim});
    add_output("y", {1, s_.seq, s_.heads, s_.head_dim});
    mutable_info().lathe_path = "rope (llama3 scaling)";
  }
  OpCost cost() const override { return {3.0 * s_.seq * s_.heads * s_.head_dim, io_bytes()}; }
  void run_lathe() override {
    RopeArgs args;
    args.x = in(0), args.y = out(0);
    args.params.theta = 500000.0;
    args.params.scaling.type = RopeScalingType::llama3;
    args.params.scaling.factor = 8.0;
    args.params.scaling.low_freq_factor = 1.0;
    args.params.scaling.high_freq_factor = 4.0;
    args.params.scaling.original_max_position_embeddings = 8192;
    rope(args);
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    int64_t half = s_.head_dim / 2;
    std::vector<T> inverse_frequency(half);
    const double pi = 3.14159265358979323846, low_wavelength = 8192.0 / 1.0, high_wavelength = 8192.0 / 4.0;
    for (int64_t i = 0; i < half; ++i) {
      double frequency = std::pow(500000.0, -2.0 * static_cast<double>(i) / static_cast<double>(s_.head_dim));
      double wavelength = 2 * pi / frequency;
      if (wavelength > low_wavelength) {
        frequency /= 8.0;
      } else if (wavelength >= high_wavelength) {
        double smooth = (8192.0 / wavelength - 1.0) / (4.0 - 1.0);
        frequency = (1 - smooth) * frequency / 8.0 + smooth * frequency;
      }
      inverse_frequency[i] = static_cast<T>(frequency);
    }
    const auto& x = io.in(0);
    auto& y = io.out(0);
    parallel_for(s_.seq, 16, [&](int64_t begin, int64_t end) {
      for (int64_t position = begin; position < end; ++position)
        for (int64_t i = 0; i < half; ++i) {
          T angle = static_cast<T>(position) * inverse_frequency[i];
          T cosine = std::cos(angle), sine = std::sin(angle);
          for (int64_t h = 0; h < s_.heads; ++h) {
            int64_t base = (position * s_.heads + h) * s_.head_dim;
            T first = x[base + i], second = x[base + i + half];
            y[base + i] = first * cosine - second * sine;
            y[base + i + half] = second * cosine + first * sine;
          }
        }
    });
  }

 private:
  RopeShape s_;
};

// One AdamW step (lr 1e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 0.1, step 10) over a
// parameter shard; the update is in place, so prepare() restores param, m and v before each run.
struct AdamWShape {
  int64_t parameters;
};

class AdamWProblem : public SuiteProblemWithReference<AdamWProblem> {
 public:
  AdamWProblem(SuiteInfo info, const AdamWShape& shape)
      : SuiteProblemWithReference(std::move(info), str_cat("parameters=", shape.parameters)), s_(shape) {
    add_input("param", {s_.parameters});
    add_input("grad", {s_.parameters}, DType::f32, -0.1, 0.1);
    add_input("m", {s_.parameters}, DType::f32, -0.01, 0.01);
    add_input("v", {s_.parameters}, DType::f32, 0, 1e-4);
    add_output("param_out", {s_.parameters});
    add_output("m_out", {s_.parameters});
    add_output("v_out", {s_.parameters});
    mutable_info().lathe_path = "adamw (in place)";
  }
  // Read param, grad, m, v; write param, m, v (in place: 7 floats per parameter).
  OpCost cost() const override { return {16.0 * s_.parameters, 28.0 * s_.parameters}; }
  void prepare() override {
    size_t bytes = sizeof(float) * s_.parameters;
    std::memcpy(out_f32(0), in_f32(0), bytes);
    std::memcpy(out_f32(1), in_f32(2), bytes);
    std::memcpy(out_f32(2), in_f32(3), bytes);
  }
  void run_lathe() override {
    AdamWArgs args;
    args.param = out(0), args.grad = in(1), args.m = out(1), args.v = out(2);
    args.lr = 1e-3f, args.weight_decay = 0.1f, args.step = 10;
    adamw(args);
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    const T lr = T(1e-3), beta1 = T(0.9), beta2 = T(0.999), eps = T(1e-8), decay = T(0.1);
    const T correction1 = T(1) - std::pow(beta1, T(10)), correction2 = T(1) - std::pow(beta2, T(10));
    parallel_for(s_.parameters, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T param = io.in(0)[i], grad = io.in(1)[i];
        T m = beta1 * io.in(2)[i] + (T(1) - beta1) * grad;
        T v = beta2 * io.in(3)[i] + (T(1) - beta2) * grad * grad;
        param -= lr * decay * param;
        param -= lr * (m / correction1) / (std::sqrt(v / correction2) + eps);
        io.out(0)[i] = param, io.out(1)[i] = m, io.out(2)[i] = v;
      }
    });
  }

 private:
  AdamWShape s_;
};

}  // namespace

void register_elementwise_problems(std::vector<SuiteEntry>& entries) {
  add_suite_problem<RmsNormProblem>(
      entries, llm_info("rms_norm", "RMSNorm over the hidden size", "Llama-3-8B hidden (4096), 2048 tokens"),
      RowsShape{2048, 4096}, RowsShape{13, 37});
  add_suite_problem<RopeProblem>(
      entries,
      llm_info("rope", "rotary position embedding with Llama-3 frequency scaling (theta 500000)",
               "Llama-3-8B queries (32 heads x 128), 2048 tokens"),
      RopeShape{2048, 32, 128}, RopeShape{11, 3, 16});
  add_suite_problem<AdamWProblem>(
      entries,
      llm_info("adamw_step", "one AdamW step with decoupled weight decay, in place",
               "a 4M-parameter shard of Llama-3.2-1B's 1.24B parameters (16 MB per tensor)"),
      AdamWShape{4 << 20}, AdamWShape{1003});
}

}  // namespace lathe
