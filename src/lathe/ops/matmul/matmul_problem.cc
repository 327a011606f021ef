// matmul and matmul_backward as registered problems (tests, tuner, bench, `lathe ops`), with
// benchmark peers for plain products: oneDNN and OpenBLAS sgemm for f32, oneDNN's matmul
// primitive for bf16 (bf16 operands, f32 output, the kernel oneDNN picks for this CPU: on AMX
// machines its AMX brgemm, the peer for lathe's tiles).
#include <cstring>
#include <memory>

#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/problem.h"

#ifdef LATHE_HAVE_ONEDNN
#include <dnnl.h>
#endif
#ifdef LATHE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lathe {
namespace {

const std::vector<std::string> kShapeKeys = {"m",    "n",   "k",          "batch",   "ta",      "tb",
                                             "dtype", "bias", "act",       "accumulate", "shared_b"};

// The inputs shared by the forward and backward problems. batch = 1 means rank-2 operands;
// any other batch (0 included) adds a leading axis. shared_b = 1 gives b batch stride 0.
struct MatmulShape {
  int64_t batch, m, n, k;
  bool trans_a, trans_b, bias, accumulate, shared_b;
  DType dtype;
  Activation activation;

  explicit MatmulShape(const ShapeSpec& spec, const std::string& op) {
    spec.check_known(op, kShapeKeys);
    batch = spec.get_int("batch", 1);
    m = spec.get_int("m", 64);
    n = spec.get_int("n", 64);
    k = spec.get_int("k", 64);
    trans_a = spec.get_int("ta", 0) != 0;
    trans_b = spec.get_int("tb", 0) != 0;
    bias = spec.get_int("bias", 0) != 0;
    accumulate = spec.get_int("accumulate", 0) != 0;
    shared_b = spec.get_int("shared_b", 0) != 0;
    dtype = parse_dtype(spec.get("dtype", "f32"));
    activation = parse_activation(spec.get("act", "none"));
  }
  bool batched() const { return batch != 1; }
  Shape with_batch(int64_t rows, int64_t cols) const { return batched() ? Shape{batch, rows, cols} : Shape{rows, cols}; }
};

// Builds a, b (and bias) on `problem`'s storage via the callbacks.
template <class MakeRandom>
void make_operands(const MatmulShape& s, MakeRandom&& random, TensorView& a, TensorView& b) {
  a = random(s.with_batch(s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k), s.dtype);
  Shape b_matrix = s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n};
  if (s.batched() && s.shared_b) {  // one weight seen by every batch entry through a zero stride
    b = random(b_matrix, s.dtype);
    b.shape = Shape{s.batch, b_matrix[0], b_matrix[1]};
    b.strides = Shape{0, b.strides[0], b.strides[1]};
  } else {
    b = random(s.with_batch(b_matrix[0], b_matrix[1]), s.dtype);
  }
}

#ifdef LATHE_HAVE_ONEDNN
// oneDNN's matmul primitive for one rank-2 bf16 product c (f32) = op(a) @ op(b), created once
// (creation generates its kernel) and run on the given buffers. Its strides express the
// transposes, so no copy is timed.
class OnednnBf16Matmul {
 public:
  // Null, with `why` set, when oneDNN has no implementation here (e.g. capped below AVX-512).
  static std::unique_ptr<OnednnBf16Matmul> create(const MatmulArgs& args, std::string* why) {
    std::unique_ptr<OnednnBf16Matmul> matmul(new OnednnBf16Matmul);
    if (dnnl_engine_create(&matmul->engine_, dnnl_cpu, 0) != dnnl_success) return fail("no CPU engine", why);
    if (dnnl_stream_create(&matmul->stream_, matmul->engine_, dnnl_stream_default_flags) != dnnl_success)
      return fail("no stream", why);
    const int64_t m = args.c.dim(0), n = args.c.dim(1), k = args.trans_a ? args.a.dim(0) : args.a.dim(1);
    const int64_t lda = args.a.stride(0), ldb = args.b.stride(0), ldc = args.c.stride(0);
    const dnnl_dims_t a_dims = {m, k}, b_dims = {k, n}, c_dims = {m, n};
    const dnnl_dims_t a_strides = {args.trans_a ? 1 : lda, args.trans_a ? lda : 1};
    const dnnl_dims_t b_strides = {args.trans_b ? 1 : ldb, args.trans_b ? ldb : 1};
    const dnnl_dims_t c_strides = {ldc, 1};
    dnnl_memory_desc_t a_md, b_md, c_md;
    if (dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, dnnl_bf16, a_strides) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&b_md, 2, b_dims, dnnl_bf16, b_strides) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&c_md, 2, c_dims, dnnl_f32, c_strides) != dnnl_success)
      return fail("bad memory descriptors", why);
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &a_md, &b_md, nullptr, &c_md) != dnnl_success)
      return fail("bad matmul descriptor", why);
    if (dnnl_primitive_desc_create(&matmul->pd_, &desc, nullptr, matmul->engine_, nullptr) != dnnl_success)
      return fail("no bf16 matmul implementation at this instruction set", why);
    const char* impl = nullptr;
    if (dnnl_primitive_desc_query(matmul->pd_, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
      matmul->impl_ = impl;
    if (dnnl_primitive_create(&matmul->primitive_, matmul->pd_) != dnnl_success ||
        dnnl_memory_create(&matmul->a_, &a_md, matmul->engine_, args.a.data) != dnnl_success ||
        dnnl_memory_create(&matmul->b_, &b_md, matmul->engine_, args.b.data) != dnnl_success ||
        dnnl_memory_create(&matmul->c_, &c_md, matmul->engine_, args.c.data) != dnnl_success)
      return fail("primitive creation failed", why);
    return matmul;
  }
  ~OnednnBf16Matmul() {
    for (dnnl_memory_t memory : {a_, b_, c_})
      if (memory) dnnl_memory_destroy(memory);
    if (primitive_) dnnl_primitive_destroy(primitive_);
    if (pd_) dnnl_primitive_desc_destroy(pd_);
    if (stream_) dnnl_stream_destroy(stream_);
    if (engine_) dnnl_engine_destroy(engine_);
  }
  void run() {
    const dnnl_exec_arg_t arguments[] = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}};
    dnnl_status_t status = dnnl_primitive_execute(primitive_, stream_, 3, arguments);
    if (status == dnnl_success) status = dnnl_stream_wait(stream_);
    LATHE_CHECK(status == dnnl_success, "matmul: oneDNN's bf16 matmul failed with status ", int(status));
  }
  const std::string& implementation() const { return impl_; }

 private:
  OnednnBf16Matmul() = default;
  static std::unique_ptr<OnednnBf16Matmul> fail(const char* reason, std::string* why) {
    *why = reason;
    return nullptr;
  }
  dnnl_engine_t engine_ = nullptr;
  dnnl_stream_t stream_ = nullptr;
  dnnl_primitive_desc_t pd_ = nullptr;
  dnnl_primitive_t primitive_ = nullptr;
  dnnl_memory_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  std::string impl_;
};
#endif

class MatmulProblem : public TypedProblem<MatmulArgs, MatmulCpuConfig> {
 public:
  MatmulProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(matmul_op(), static_cast<void (*)(const MatmulArgs&, const Dispatch&)>(matmul)),
        shape_(spec, "matmul") {
    make_operands(shape_, [&](const Shape& shape, DType dtype) { return random_tensor(shape, dtype, seed); }, args_.a,
                  args_.b);
    args_.trans_a = shape_.trans_a;
    args_.trans_b = shape_.trans_b;
    args_.c = output_tensor(shape_.with_batch(shape_.m, shape_.n), DType::f32);
    if (shape_.bias) args_.bias = random_tensor({shape_.n}, DType::f32, seed);
    args_.activation = shape_.activation;
    args_.accumulate = shape_.accumulate;
    if (shape_.accumulate) c_initial_ = random_tensor(args_.c.shape, DType::f32, seed);
  }
  OpCost cost() const override { return matmul_cost(args_); }

  void run(const std::string& impl, const ConfigParams* config) override {
    restore_accumulator();
    TypedProblem::run(impl, config);
  }

  std::vector<std::string> peers() const override {
    if (shape_.batched() || shape_.bias || shape_.accumulate || shape_.activation != Activation::none) return {};
    std::vector<std::string> names;
    if (shape_.dtype == DType::bf16) {
#ifdef LATHE_HAVE_ONEDNN
      if (onednn_bf16()) names.push_back("onednn");
#endif
      return names;
    }
    if (shape_.dtype != DType::f32) return {};
#ifdef LATHE_HAVE_ONEDNN
    names.push_back("onednn");
#endif
#ifdef LATHE_HAVE_OPENBLAS
    names.push_back("openblas");
#endif
    return names;
  }

  std::string peer_detail(const std::string& peer) const override {
#ifdef LATHE_HAVE_ONEDNN
    if (peer == "onednn" && shape_.dtype == DType::bf16 && onednn_bf16()) return onednn_bf16()->implementation();
#endif
    (void)peer;
    return "";
  }

  void run_peer(const std::string& peer) override {
#ifdef LATHE_HAVE_ONEDNN
    if (peer == "onednn" && shape_.dtype == DType::bf16) {
      LATHE_CHECK(onednn_bf16(), "matmul: oneDNN has no bf16 matmul here (", onednn_bf16_failure_, ")");
      onednn_bf16()->run();
      return;
    }
#endif
    const float* a = static_cast<const float*>(args_.a.data);
    const float* b = static_cast<const float*>(args_.b.data);
    float* c = static_cast<float*>(args_.c.data);
    const int64_t lda = args_.a.stride(0), ldb = args_.b.stride(0), ldc = args_.c.stride(0);
    LATHE_CHECK(!peers().empty(), "matmul: no peer supports shape ", shape_key());
#ifdef LATHE_HAVE_ONEDNN
    if (peer == "onednn") {
      dnnl_status_t status = dnnl_sgemm(shape_.trans_a ? 'T' : 'N', shape_.trans_b ? 'T' : 'N', shape_.m, shape_.n,
                                        shape_.k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
      LATHE_CHECK(status == dnnl_success, "matmul: dnnl_sgemm failed with status ", int(status));
      return;
    }
#endif
#ifdef LATHE_HAVE_OPENBLAS
    if (peer == "openblas") {
      cblas_sgemm(CblasRowMajor, shape_.trans_a ? CblasTrans : CblasNoTrans, shape_.trans_b ? CblasTrans : CblasNoTrans,
                  shape_.m, shape_.n, shape_.k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
      return;
    }
#endif
    (void)a, (void)b, (void)c, (void)lda, (void)ldb, (void)ldc;
    TypedProblem::run_peer(peer);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"c", args_.c}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MatmulArgs args = args_;
    args.c = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(c_initial_));
    use_double ? matmul_reference<double>(args) : matmul_reference<float>(args);
  }

 private:
  // c is read and written when accumulating: every run starts from the same initial c.
  void restore_accumulator() {
    if (shape_.accumulate) std::memcpy(args_.c.data, c_initial_.data, sizeof(float) * args_.c.numel());
  }

#ifdef LATHE_HAVE_ONEDNN
  // The bf16 peer, created on first use (null where oneDNN has no implementation).
  OnednnBf16Matmul* onednn_bf16() const {
    if (!onednn_bf16_tried_) {
      onednn_bf16_tried_ = true;
      onednn_bf16_ = OnednnBf16Matmul::create(args_, &onednn_bf16_failure_);
    }
    return onednn_bf16_.get();
  }
  mutable bool onednn_bf16_tried_ = false;
  mutable std::unique_ptr<OnednnBf16Matmul> onednn_bf16_;
  mutable std::string onednn_bf16_failure_;
#endif

  MatmulShape shape_;
  TensorView c_initial_;
};

class MatmulBackwardProblem : public TypedProblem<MatmulBackwardArgs, MatmulCpuConfig> {
 public:
  MatmulBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(matmul_backward_op(), matmul_backward), shape_(spec, "matmul_backward") {
    make_operands(shape_, [&](const Shape& shape, DType dtype) { return random_tensor(shape, dtype, seed); }, args_.a,
                  args_.b);
    args_.trans_a = shape_.trans_a;
    args_.trans_b = shape_.trans_b;
    args_.activation = shape_.activation;
    Shape c_shape = shape_.with_batch(shape_.m, shape_.n);
    args_.dc = random_tensor(c_shape, DType::f32, seed);
    if (shape_.activation != Activation::none) args_.pre_activation = random_tensor(c_shape, DType::f32, seed, -3, 3);
    args_.da = output_tensor(args_.a.shape, DType::f32);
    bool shared = args_.b.rank() == 3 && args_.b.stride(0) == 0;
    args_.db = output_tensor(shared ? Shape{args_.b.dim(1), args_.b.dim(2)} : args_.b.shape, DType::f32);
    if (shape_.bias) args_.dbias = output_tensor({shape_.n}, DType::f32);
  }
  OpCost cost() const override { return matmul_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{"da", args_.da}, {"db", args_.db}};
    if (args_.dbias.data) list.push_back({"dbias", args_.dbias});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MatmulBackwardArgs args = args_;
    args.da = into[0];
    args.db = into[1];
    if (args.dbias.data) args.dbias = into[2];
    use_double ? matmul_backward_reference<double>(args) : matmul_backward_reference<float>(args);
  }

 private:
  MatmulShape shape_;
};

std::string random_matmul_shape(uint64_t seed, bool backward) {
  const char* activations[] = {"none", "relu", "gelu_tanh", "silu"};
  int64_t batch = seed % 4 == 0 ? random_extent(seed, 0, 2, 3) : 1;
  std::string act = activations[random_extent(seed, 1, 0, 3)];
  bool accumulate = !backward && act == "none" && seed % 3 == 0;
  return str_cat("m=", random_extent(seed, 2, 1, 80), ",n=", random_extent(seed, 3, 1, 150), ",k=",
                 random_extent(seed, 4, 1, 120), ",ta=", random_extent(seed, 5, 0, 1), ",tb=", random_extent(seed, 6, 0, 1),
                 ",dtype=", seed % 2 == 0 ? "bf16" : "f32", ",bias=", random_extent(seed, 7, 0, 1), ",act=", act,
                 ",accumulate=", int(accumulate), ",batch=", batch, batch > 1 ? str_cat(",shared_b=", seed % 8 == 0) : "");
}

const std::vector<NamedShape> kBenchShapes = {
    {"square 1024 (f32)", "m=1024,n=1024,k=1024"},
    {"square 2048 (f32)", "m=2048,n=2048,k=2048"},
    {"square 4096 (f32)", "m=4096,n=4096,k=4096"},
    {"square 1024 (bf16)", "m=1024,n=1024,k=1024,dtype=bf16"},
    {"square 2048 (bf16)", "m=2048,n=2048,k=2048,dtype=bf16"},
    {"square 4096 (bf16)", "m=4096,n=4096,k=4096,dtype=bf16"},
    {"default config MLP gate/up, 4096 tokens (bf16)", "m=4096,n=1024,k=256,tb=1,dtype=bf16"},
    {"Llama-3.2-1B q_proj, 2048 tokens", "m=2048,n=2048,k=2048,tb=1"},
    {"Llama-3.2-1B k_proj (8 KV heads), 2048 tokens", "m=2048,n=512,k=2048,tb=1"},
    {"Llama-3.2-1B MLP gate/up, 2048 tokens", "m=2048,n=8192,k=2048,tb=1"},
    {"Llama-3.2-1B MLP down, 2048 tokens", "m=2048,n=2048,k=8192,tb=1"},
    {"Llama-3.2-1B MLP gate/up, 2048 tokens (bf16)", "m=2048,n=8192,k=2048,tb=1,dtype=bf16"},
    // Weight gradients (dW = dy^T x: A transposed), a third of training's products.
    {"default config q/k/v/o weight gradient, 4096 tokens (f32)", "m=256,n=256,k=4096,ta=1"},
    {"91M config (d_model 768) q/k/v/o weight gradient, 2048 tokens (f32)", "m=768,n=768,k=2048,ta=1"},
    {"default config q/k/v/o weight gradient, 4096 tokens (bf16)", "m=256,n=256,k=4096,ta=1,dtype=bf16"},
    {"Llama-3.2-1B q_proj weight gradient, 2048 tokens (bf16)", "m=2048,n=2048,k=2048,ta=1,dtype=bf16"},
    {"GPT-2 small MLP c_fc + GELU, 1024 tokens", "m=1024,n=3072,k=768,bias=1,act=gelu_tanh"},
    {"Qwen3-0.6B q_proj, 4096 tokens", "m=4096,n=2048,k=1024,tb=1"},
};

const std::vector<NamedShape> kBackwardBenchShapes = {
    {"Llama-3.2-1B q_proj backward, 2048 tokens", "m=2048,n=2048,k=2048,tb=1"},
    {"GPT-2 small MLP c_fc + GELU backward, 1024 tokens", "m=1024,n=3072,k=768,bias=1,act=gelu_tanh"},
};

const std::vector<std::string> kEdgeShapes = {
    "m=0,n=5,k=3",
    "m=4,n=0,k=3",
    "m=1,n=1,k=1",
    "m=5,n=3,k=0,bias=1,act=silu",
    "m=7,n=33,k=65",
    "m=65,n=7,k=33,ta=1,tb=1",
    "m=33,n=65,k=7,ta=1",
    "m=17,n=40,k=9,tb=1,dtype=bf16",
    "m=15,n=33,k=7,ta=1,dtype=bf16,bias=1,act=relu",
    "m=30,n=100,k=3,act=relu,bias=1",
    "m=18,n=40,k=19,ta=1,bias=1",  // 14 + 4 rows: the AVX-512 f32 tile's ragged 4-row panel
    "batch=3,m=9,n=17,k=13,shared_b=1,bias=1,act=gelu_tanh",
    "batch=2,m=5,n=70,k=21,tb=1,bias=1,act=silu,dtype=bf16",
    "batch=0,m=3,n=4,k=5",
    // Deeper than one in-place panel (1 MB: k 4096 in f32, 8192 in bf16): depth slices, the bias
    // and activation on the last one only.
    "m=13,n=70,k=4500,bias=1,act=gelu_tanh",
    "m=7,n=70,k=8200,dtype=bf16,bias=1,act=relu",
};

const std::vector<std::string> kForwardOnlyEdgeShapes = {"batch=2,m=5,n=70,k=21,accumulate=1,bias=1",
                                                         "m=6,n=9,k=0,accumulate=1,bias=1",
                                                         "m=9,n=65,k=4300,accumulate=1,bias=1"};

}  // namespace

void register_matmul_ops(std::vector<OpRegistration>& ops) {
  std::vector<std::string> forward_edges = kEdgeShapes;
  forward_edges.insert(forward_edges.end(), kForwardOnlyEdgeShapes.begin(), kForwardOnlyEdgeShapes.end());
  ops.push_back({"matmul", "c = act(op(a) @ op(b) + bias), f32 or bf16 inputs, f32 accumulation", kShapeKeys,
                 "m=2048,n=2048,k=2048,dtype=f32", kBenchShapes, forward_edges,
                 [](uint64_t seed) { return random_matmul_shape(seed, false); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MatmulProblem>(spec, seed);
                 }});
  ops.push_back({"matmul_backward", "gradients of matmul for a, b and bias (through the activation)", kShapeKeys,
                 "m=2048,n=2048,k=2048,dtype=f32", kBackwardBenchShapes, kEdgeShapes,
                 [](uint64_t seed) { return random_matmul_shape(seed, true); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MatmulBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
