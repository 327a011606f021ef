// matmul's CUDA kernels around the product (the activation, its gradient, the bias of an empty
// sum; the bias gradient is cuda::ColumnSumsInOrder) and the host steps that order them with the
// products, shared by the GPU (matmul_cuda.cu: cuda::DeviceLauncher, products in cuBLASLt) and the
// host emulation (matmul_cuda_emulated.cc: simt::HostLauncher, products in the CPU's matmul); see
// device/cuda_launcher.cuh. The steps take the product as a callable,
//   product(step): step.c (+)= op(step.a) @ op(step.b) (+ step.bias), inner dimension > 0, no activation,
// so everything but the GEMM itself (its empty sums, the backward's bf16 split and the order and
// accumulation of its products) is the same code on both.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_cuda.h"
#include "lathe/ops/matmul/matmul_cuda_split.cuh"

namespace lathe::matmul_cuda {

constexpr int kThreads = 256;
constexpr const char* kForwardOp = "matmul (cuda)";
constexpr const char* kBackwardOp = "matmul_backward (cuda)";

// The definitions of ops/matmul/matmul.cc's apply_activation and activation_derivative, in f32.
__device__ inline float activate(float x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return x;
    case Activation::relu:
      return x > 0.0f ? x : 0.0f;
    case Activation::gelu_tanh: {
      const float scale = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(scale * (x + 0.044715f * x * x * x)));
    }
    case Activation::silu:
      return x / (1.0f + expf(-x));
  }
  return x;
}

__device__ inline float activation_slope(float x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return 1.0f;
    case Activation::relu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Activation::gelu_tanh: {
      const float scale = 0.7978845608028654f;
      const float t = tanhf(scale * (x + 0.044715f * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * scale * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case Activation::silu: {
      const float sigmoid = 1.0f / (1.0f + expf(-x));
      return sigmoid * (1.0f + x * (1.0f - sigmoid));
    }
  }
  return 1.0f;
}

// Element `flat` of m in row-major (batch, rows, cols) order.
__device__ inline int64_t offset_of(const DeviceMatrices& m, int64_t flat) {
  const int64_t per_batch = m.rows * m.cols;
  const int64_t t = flat / per_batch, rest = flat % per_batch;
  return t * m.batch_stride + rest / m.cols * m.ld + rest % m.cols;
}

__device__ inline int64_t element_count(const DeviceMatrices& m) { return m.batch * m.rows * m.cols; }

// A thread per element (grid-stride): c = act(c).
struct Activate {
  __device__ void operator()(unsigned char*, DeviceMatrices c, Activation activation) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < element_count(c);
         flat += int64_t{gridDim.x} * blockDim.x) {
      float& value = c.data[offset_of(c, flat)];
      value = activate(value, activation);
    }
  }
};

// A thread per element (grid-stride): g[flat] = dc * act'(pre) (pre unread without activation);
// g contiguous.
struct ActivationGradient {
  __device__ void operator()(unsigned char*, DeviceMatrices dc, DeviceMatrices pre, Activation activation,
                             float* g) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < element_count(dc);
         flat += int64_t{gridDim.x} * blockDim.x) {
      const float slope =
          activation == Activation::none ? 1.0f : activation_slope(pre.data[offset_of(pre, flat)], activation);
      g[flat] = dc.data[offset_of(dc, flat)] * slope;
    }
  }
};

// A thread per element (grid-stride): the product of an empty sum, c = bias or c += bias when
// accumulating (bias null: zero).
struct EmptySum {
  __device__ void operator()(unsigned char*, DeviceMatrices c, const float* bias, bool accumulate) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < element_count(c);
         flat += int64_t{gridDim.x} * blockDim.x) {
      float& value = c.data[offset_of(c, flat)];
      value = (accumulate ? value : 0.0f) + (bias ? bias[flat % c.cols] : 0.0f);
    }
  }
};

// A matrix view (rank 2, or rank 3 with its batch stride) as the kernels see it.
inline DeviceMatrices matrices_of(const TensorView& view) {
  return {static_cast<float*>(view.data),
          view.rank() == 3 ? view.dim(0) : 1,
          view.dim(-2),
          view.dim(-1),
          row_stride_of(view),
          view.rank() == 3 ? view.stride(0) : 0};
}

// step.c (+)= op(a) @ op(b) (+ bias) through `product`, or the EmptySum kernel when the inner
// dimension is 0; step.activation is ignored.
template <class Launcher, class Product>
void product_or_empty_sum(const MatmulArgs& step, Launcher& launcher, Product& product, const char* op) {
  const int64_t m = step.c.dim(-2), n = step.c.dim(-1);
  const int64_t k = step.trans_a ? step.a.dim(-2) : step.a.dim(-1);
  if (m == 0 || n == 0) return;
  if (k > 0) {
    MatmulArgs plain = step;
    plain.activation = Activation::none;
    return product(plain);
  }
  if (step.accumulate && !step.bias.data) return;
  const DeviceMatrices c = matrices_of(step.c);
  launcher.launch(op, dim3(cuda::grid_stride_blocks(c.batch * m * n, kThreads)), kThreads, 0, EmptySum{}, c,
                  static_cast<const float*>(step.bias.data), step.accumulate);
}

// c = act(op(a) @ op(b) + bias), or c += op(a) @ op(b) + bias: the product (bias in its epilogue),
// then the activation in place.
template <class Launcher, class Product>
void run_forward(const MatmulArgs& args, Launcher& launcher, Product product) {
  product_or_empty_sum(args, launcher, product, kForwardOp);
  const DeviceMatrices c = matrices_of(args.c);
  const int64_t count = c.batch * c.rows * c.cols;
  if (args.activation == Activation::none || count == 0) return;
  launcher.launch(kForwardOp, dim3(cuda::grid_stride_blocks(count, kThreads)), kThreads, 0, Activate{}, c,
                  args.activation);
}

// A view of batch entry t of a rank-3 view (or the view itself), rank 2.
inline TensorView entry(const TensorView& view, int64_t t) { return view.rank() == 3 ? view.select(0, t) : view; }

// The backward from forward products (matmul.h): g = dc * act'(pre) by one kernel into a
// contiguous (batch, m, n) buffer; bf16 operands take g as kBf16Parts bf16 tensors (SplitBf16x3),
// each product once per part, accumulating; dbias by one thread per column (ColumnSumsInOrder).
template <class Launcher, class Product>
void run_backward(const MatmulBackwardArgs& args, Launcher& launcher, Product product) {
  const int64_t batch = args.dc.rank() == 3 ? args.dc.dim(0) : 1, m = args.dc.dim(-2), n = args.dc.dim(-1);
  Tensor g_storage = launcher.scratch(Shape{batch, m, n}, DType::f32, "matmul_backward gradient");
  const int64_t count = batch * m * n;
  if (count > 0) {
    const DeviceMatrices none{nullptr, 0, 0, 0, 0, 0};
    launcher.launch(kBackwardOp, dim3(cuda::grid_stride_blocks(count, kThreads)), kThreads, 0, ActivationGradient{},
                    matrices_of(args.dc), args.activation == Activation::none ? none : matrices_of(args.pre_activation),
                    args.activation, g_storage.ptr<float>());
  }
  const TensorView g_full = args.dc.rank() == 3 ? g_storage.view() : g_storage.view().select(0, 0);
  const bool bf16 = args.a.dtype == DType::bf16;
  const int parts = bf16 ? kBf16Parts : 1;
  Tensor g_parts;
  if (bf16) {
    g_parts = launcher.scratch(Shape{parts, batch, m, n}, DType::bf16, "matmul_backward gradient in bf16 parts");
    if (count > 0)
      launcher.launch(kBackwardOp, dim3(cuda::grid_stride_blocks(count, kThreads)), kThreads, 0, SplitBf16x3{},
                      static_cast<const float*>(g_storage.ptr<float>()), count,
                      static_cast<__nv_bfloat16*>(g_parts.view().data));
  }
  // Part `part` of g (all of g in f32), in g's rank; of batch entry t when shared (t >= 0).
  auto g_at = [&](int part, int64_t t) {
    TensorView g = g_full;
    if (bf16) {
      g = g_parts.view().select(0, part);
      if (args.dc.rank() != 3) g = g.select(0, 0);
    }
    return t < 0 ? g : entry(g, t);
  };
  auto step = [&](const TensorView& a, bool trans_a, const TensorView& b, bool trans_b, const TensorView& c,
                  bool accumulate) {
    product_or_empty_sum(MatmulArgs{a, b, c, {}, trans_a, trans_b, accumulate}, launcher, product, kBackwardOp);
  };
  if (args.da.data) {
    // da = g @ op(b)^T in a's layout; transposed a: da = op(b) @ g^T. Summed over the batch when a
    // is shared (a rank-2 da): batch entries accumulate in order.
    const bool shared = args.da.rank() == 2 && batch > 1;
    for (int64_t t = 0; t < (shared ? batch : 1); ++t)
      for (int part = 0; part < parts; ++part) {
        const TensorView b_t = shared ? entry(args.b, t) : args.b, g_t = g_at(part, shared ? t : -1);
        if (!args.trans_a)
          step(g_t, false, b_t, !args.trans_b, args.da, t > 0 || part > 0);
        else
          step(b_t, args.trans_b, g_t, true, args.da, t > 0 || part > 0);
      }
  }
  if (args.db.data) {
    // db = op(a)^T @ g in b's layout; transposed b: db = g^T @ op(a). Summed over the batch when
    // b is shared (a rank-2 db): batch entries accumulate in order.
    const bool shared = args.db.rank() == 2 && batch > 1;
    for (int64_t t = 0; t < (shared ? batch : 1); ++t)
      for (int part = 0; part < parts; ++part) {
        const TensorView a_t = shared ? entry(args.a, t) : args.a, g_t = g_at(part, shared ? t : -1);
        if (!args.trans_b)
          step(a_t, !args.trans_a, g_t, false, args.db, t > 0 || part > 0);
        else
          step(g_t, true, a_t, args.trans_a, args.db, t > 0 || part > 0);
      }
  }
  if (args.dbias.data && n > 0)
    launcher.launch(kBackwardOp, dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads)), kThreads, 0,
                    cuda::ColumnSumsInOrder{}, static_cast<const float*>(g_storage.ptr<float>()), batch * m, n,
                    static_cast<float*>(args.dbias.data));
  // g_storage goes back to the cache on return: work queued later on lathe's one stream runs after
  // the products above, so reusing its memory is safe without waiting.
}

}  // namespace lathe::matmul_cuda
