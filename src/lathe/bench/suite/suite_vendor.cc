#include "lathe/bench/suite/suite_vendor.h"

#include <unordered_map>

#include "lathe/core/error.h"

#ifdef LATHE_HAVE_ONEDNN
#include <dnnl.h>

#include <dnnl.hpp>
#endif
#ifdef LATHE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lathe {

GemmVendor best_gemm_vendor() {
#if defined(LATHE_HAVE_ONEDNN)
  return GemmVendor::onednn;
#elif defined(LATHE_HAVE_OPENBLAS)
  return GemmVendor::openblas;
#else
  return GemmVendor::none;
#endif
}

const char* gemm_vendor_name(GemmVendor vendor) {
  switch (vendor) {
    case GemmVendor::onednn:
      return "oneDNN";
    case GemmVendor::openblas:
      return "OpenBLAS";
    case GemmVendor::none:
      break;
  }
  return "none";
}

bool onednn_available() {
#ifdef LATHE_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

void vendor_sgemm(GemmVendor vendor, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef LATHE_HAVE_ONEDNN
  if (vendor == GemmVendor::onednn) {
    dnnl_status_t status = dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    LATHE_CHECK(status == dnnl_success, "suite: dnnl_sgemm failed with status ", int(status));
    return;
  }
#endif
#ifdef LATHE_HAVE_OPENBLAS
  if (vendor == GemmVendor::openblas) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
    return;
  }
#endif
  (void)trans_b, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  throw_error("suite: GEMM vendor ", gemm_vendor_name(vendor), " is not built in");
}

#ifdef LATHE_HAVE_ONEDNN

namespace {

dnnl::algorithm eltwise_algorithm(const std::string& name) {
  using A = dnnl::algorithm;
  static const std::pair<const char*, A> table[] = {
      {"relu", A::eltwise_relu},         {"gelu_tanh", A::eltwise_gelu_tanh},
      {"gelu_erf", A::eltwise_gelu_erf}, {"swish", A::eltwise_swish},
      {"mish", A::eltwise_mish},         {"tanh", A::eltwise_tanh},
      {"clip", A::eltwise_clip},         {"linear", A::eltwise_linear},
      {"logistic", A::eltwise_logistic}, {"hardswish", A::eltwise_hardswish},
      {"elu", A::eltwise_elu},           {"soft_relu", A::eltwise_soft_relu},
      {"exp", A::eltwise_exp},           {"square", A::eltwise_square},
      {"abs", A::eltwise_abs},
  };
  for (const auto& [known, algorithm] : table)
    if (name == known) return algorithm;
  throw_error("suite: unknown oneDNN eltwise algorithm '", name, "'");
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace

struct OnednnFusedMatmul::State {
  dnnl::matmul primitive;
  dnnl::memory a, b, bias, c;
  std::vector<dnnl::memory> binary;
  std::vector<int> binary_positions;
  dnnl::stream stream{cpu_engine()};
  bool has_bias = false;
};

OnednnFusedMatmul::OnednnFusedMatmul(int64_t m, int64_t n, int64_t k, bool trans_b, bool has_bias,
                                     std::vector<OnednnPostOp> post_ops)
    : state_(std::make_unique<State>()) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a_desc({m, k}, dt::f32, tag::ab);
  dnnl::memory::desc b_desc({k, n}, dt::f32, trans_b ? tag::ba : tag::ab);
  dnnl::memory::desc bias_desc({1, n}, dt::f32, tag::ab);
  dnnl::memory::desc c_desc({m, n}, dt::f32, tag::ab);
  dnnl::post_ops ops;
  std::vector<dnnl::memory::desc> binary_descs;
  int position = -1;
  for (const auto& op : post_ops) {
    ++position;
    using Kind = OnednnPostOp::Kind;
    if (op.kind == Kind::eltwise) {
      ops.append_eltwise(op.scale, eltwise_algorithm(op.algorithm), op.alpha, op.beta);
      continue;
    }
    bool row = op.kind == Kind::add_row || op.kind == Kind::multiply_row;
    bool add = op.kind == Kind::add_row || op.kind == Kind::add_matrix;
    dnnl::memory::desc desc({row ? 1 : m, n}, dt::f32, tag::ab);
    ops.append_binary(add ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul, desc);
    binary_descs.push_back(desc);
    state_->binary_positions.push_back(position);
  }
  dnnl::primitive_attr attributes;
  attributes.set_post_ops(ops);
  try {
    auto descriptor =
        has_bias ? dnnl::matmul::desc(a_desc, b_desc, bias_desc, c_desc) : dnnl::matmul::desc(a_desc, b_desc, c_desc);
    dnnl::matmul::primitive_desc primitive_desc(descriptor, attributes, cpu_engine());
    state_->primitive = dnnl::matmul(primitive_desc);
  } catch (const dnnl::error& error) {
    throw_error("suite: oneDNN rejected the fused matmul: ", error.what());
  }
  state_->a = dnnl::memory(a_desc, cpu_engine(), nullptr);
  state_->b = dnnl::memory(b_desc, cpu_engine(), nullptr);
  state_->bias = dnnl::memory(bias_desc, cpu_engine(), nullptr);
  state_->c = dnnl::memory(c_desc, cpu_engine(), nullptr);
  for (const auto& desc : binary_descs) state_->binary.emplace_back(desc, cpu_engine(), nullptr);
  state_->has_bias = has_bias;
}

OnednnFusedMatmul::~OnednnFusedMatmul() = default;

void OnednnFusedMatmul::run(const float* a, const float* b, const float* bias, float* c,
                            const std::vector<const float*>& binary) {
  LATHE_ASSERT(binary.size() == state_->binary.size());
  state_->a.set_data_handle(const_cast<float*>(a));
  state_->b.set_data_handle(const_cast<float*>(b));
  state_->c.set_data_handle(c);
  std::unordered_map<int, dnnl::memory> arguments = {
      {DNNL_ARG_SRC, state_->a}, {DNNL_ARG_WEIGHTS, state_->b}, {DNNL_ARG_DST, state_->c}};
  if (state_->has_bias) {
    state_->bias.set_data_handle(const_cast<float*>(bias));
    arguments[DNNL_ARG_BIAS] = state_->bias;
  }
  // Binary post-op arguments are numbered by their position among all post-ops.
  for (size_t i = 0; i < binary.size(); ++i) {
    state_->binary[i].set_data_handle(const_cast<float*>(binary[i]));
    arguments[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(state_->binary_positions[i])) | DNNL_ARG_SRC_1] =
        state_->binary[i];
  }
  state_->primitive.execute(state_->stream, arguments);
  state_->stream.wait();
}

#else

struct OnednnFusedMatmul::State {};

OnednnFusedMatmul::OnednnFusedMatmul(int64_t, int64_t, int64_t, bool, bool, std::vector<OnednnPostOp>) {
  throw_error("suite: oneDNN is not built in");
}
OnednnFusedMatmul::~OnednnFusedMatmul() = default;
void OnednnFusedMatmul::run(const float*, const float*, const float*, float*, const std::vector<const float*>&) {}

#endif

}  // namespace lathe
