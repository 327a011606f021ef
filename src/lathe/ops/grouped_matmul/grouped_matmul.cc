#include "lathe/ops/grouped_matmul/grouped_matmul.h"

#include <type_traits>
#include <vector>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/amx_impl.h"
#include "lathe/ops/grouped_matmul/grouped_matmul_cuda.h"
#include "lathe/ops/matmul/matmul_tiles.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(grouped_matmul_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_backward_kernel, GroupedMatmulBackwardArgs, MatmulCpuConfig)
// vdpbf16ps on pair-interleaved bf16 panels, as matmul's; only the avx512 ones are registered
// (the others emulate the instruction so tests can check the layout on machines without it).
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_bf16_dot_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_ISA_KERNEL(grouped_matmul_backward_bf16_dot_kernel, GroupedMatmulBackwardArgs, MatmulCpuConfig)
// AMX tiles (grouped_matmul_amx_kernels.cc): avx512:: runs tdpbf16ps, scalar:: the emulation of it.
LATHE_DECLARE_AMX_KERNEL(grouped_matmul_amx_kernel, GroupedMatmulArgs, MatmulCpuConfig)
LATHE_DECLARE_AMX_KERNEL(grouped_matmul_backward_amx_kernel, GroupedMatmulBackwardArgs, MatmulCpuConfig)

namespace {

// The sizes of one call: `experts` groups over `rows` rows, each multiplying (., K) by (K, N).
struct GroupedGeometry {
  int64_t rows = 0, experts = 0, n = 0, k = 0;
};

GroupedGeometry geometry_of(const TensorView& x, const TensorView& w) {
  return {x.dim(0), w.dim(0), w.dim(1), w.dim(2)};
}

// x, w and group_offsets, shared by the forward and the backward.
GroupedGeometry check_inputs(ArgChecker& check, const TensorView& x, const TensorView& w,
                             const TensorView& group_offsets) {
  check.rank("x", x, 2).rank("w", w, 3).rank("group_offsets", group_offsets, 1);
  check.dtype_in("x", x, {DType::f32, DType::bf16})
      .dtype("w", w, x.dtype)
      .dtype("group_offsets", group_offsets, DType::i64);
  check.inner_contiguous("x", x).inner_contiguous("w", w).contiguous("group_offsets", group_offsets);
  GroupedGeometry g = geometry_of(x, w);
  check.require(w.dim(2) == x.dim(1), "w has shape ", w.shape.to_string(), " but x has shape ", x.shape.to_string(),
                " (w's last axis must be x's K = ", x.dim(1), ")");
  check.shape("group_offsets", group_offsets, {g.experts + 1});
  std::vector<int64_t> offsets = grouped_matmul_offsets(group_offsets);
  check.require(offsets[0] == 0, "group_offsets[0] is ", offsets[0], ", expected 0");
  for (int64_t e = 0; e < g.experts; ++e)
    check.require(offsets[e + 1] >= offsets[e], "group_offsets must not decrease, but group_offsets[", e + 1,
                  "] = ", offsets[e + 1], " < group_offsets[", e, "] = ", offsets[e]);
  check.require(offsets[g.experts] == g.rows, "group_offsets[", g.experts, "] is ", offsets[g.experts],
                ", expected x's row count ", g.rows);
  return g;
}

void check_output(ArgChecker& check, const char* name, const TensorView& view) {
  check.dtype(name, view, DType::f32).inner_contiguous(name, view);
}

}  // namespace

void validate(const GroupedMatmulArgs& args) {
  ArgChecker check("grouped_matmul");
  GroupedGeometry g = check_inputs(check, args.x, args.w, args.group_offsets);
  check.shape("y", args.y, {g.rows, g.n});
  check_output(check, "y", args.y);
}

void validate(const GroupedMatmulBackwardArgs& args) {
  ArgChecker check("grouped_matmul_backward");
  GroupedGeometry g = check_inputs(check, args.x, args.w, args.group_offsets);
  check.shape("dy", args.dy, {g.rows, g.n}).inner_contiguous("dy", args.dy);
  if (args.x.dtype == DType::bf16)
    check.dtype_in("dy", args.dy, {DType::f32, DType::bf16});
  else
    check.dtype("dy", args.dy, DType::f32);
  if (args.dx.data) {
    check.shape("dx", args.dx, {g.rows, g.k});
    check_output(check, "dx", args.dx);
  }
  if (args.dw.data) {
    check.shape("dw", args.dw, {g.experts, g.n, g.k});
    check_output(check, "dw", args.dw);
  }
}

template <class T>
void grouped_matmul_reference(const GroupedMatmulArgs& args) {
  GroupedGeometry g = geometry_of(args.x, args.w);
  std::vector<int64_t> offsets = grouped_matmul_offsets(args.group_offsets);
  std::vector<T> x = to_vector<T>(args.x), w = to_vector<T>(args.w);
  std::vector<T> y = args.accumulate ? to_vector<T>(args.y) : std::vector<T>(g.rows * g.n, T(0));
  for (int64_t e = 0; e < g.experts; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t j = 0; j < g.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < g.k; ++p) sum += x[r * g.k + p] * w[(e * g.n + j) * g.k + p];
        y[r * g.n + j] = args.accumulate ? y[r * g.n + j] + sum : sum;
      }
  write_from_vector(args.y, y);
}

template <class T>
void grouped_matmul_backward_reference(const GroupedMatmulBackwardArgs& args) {
  GroupedGeometry g = geometry_of(args.x, args.w);
  std::vector<int64_t> offsets = grouped_matmul_offsets(args.group_offsets);
  std::vector<T> x = to_vector<T>(args.x), w = to_vector<T>(args.w), dy = to_vector<T>(args.dy);
  if (args.dx.data) {
    std::vector<T> dx(g.rows * g.k, T(0));
    for (int64_t e = 0; e < g.experts; ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (int64_t p = 0; p < g.k; ++p) {
          T sum = 0;
          for (int64_t j = 0; j < g.n; ++j) sum += dy[r * g.n + j] * w[(e * g.n + j) * g.k + p];
          dx[r * g.k + p] = sum;
        }
    write_from_vector(args.dx, dx);
  }
  if (args.dw.data) {
    std::vector<T> dw = args.accumulate_dw ? to_vector<T>(args.dw) : std::vector<T>(g.experts * g.n * g.k, T(0));
    for (int64_t e = 0; e < g.experts; ++e)
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t p = 0; p < g.k; ++p) {
          T sum = 0;
          for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) sum += dy[r * g.n + j] * x[r * g.k + p];
          T& out = dw[(e * g.n + j) * g.k + p];
          out = args.accumulate_dw ? out + sum : sum;
        }
    write_from_vector(args.dw, dw);
  }
}

template void grouped_matmul_reference<double>(const GroupedMatmulArgs&);
template void grouped_matmul_reference<float>(const GroupedMatmulArgs&);
template void grouped_matmul_backward_reference<double>(const GroupedMatmulBackwardArgs&);
template void grouped_matmul_backward_reference<float>(const GroupedMatmulBackwardArgs&);

namespace {

// Bytes of the weights of experts that own at least one row.
double used_weight_bytes(const TensorView& w, const TensorView& group_offsets) {
  std::vector<int64_t> offsets = grouped_matmul_offsets(group_offsets);
  int64_t used = 0;
  for (size_t e = 0; e + 1 < offsets.size(); ++e) used += offsets[e + 1] > offsets[e] ? 1 : 0;
  return static_cast<double>(used) * w.dim(1) * w.dim(2) * dtype_size(w.dtype);
}

}  // namespace

OpCost grouped_matmul_cost(const GroupedMatmulArgs& args) {
  GroupedGeometry g = geometry_of(args.x, args.w);
  double outputs = static_cast<double>(g.rows) * g.n;
  return {2.0 * outputs * g.k, args.x.numel() * double(dtype_size(args.x.dtype)) +
                                   used_weight_bytes(args.w, args.group_offsets) +
                                   outputs * 4 * (args.accumulate ? 2 : 1) + (g.experts + 1) * 8.0};
}

OpCost grouped_matmul_backward_cost(const GroupedMatmulBackwardArgs& args) {
  GroupedGeometry g = geometry_of(args.x, args.w);
  double products = (args.dx.data ? 1 : 0) + (args.dw.data ? 1 : 0);
  double bytes = args.dy.numel() * double(dtype_size(args.dy.dtype)) + (g.experts + 1) * 8.0;
  if (args.dx.data) bytes += used_weight_bytes(args.w, args.group_offsets) + args.dx.numel() * 4.0;
  if (args.dw.data)
    bytes += args.x.numel() * double(dtype_size(args.x.dtype)) + args.dw.numel() * 4.0 * (args.accumulate_dw ? 2 : 1);
  return {2.0 * g.rows * g.n * g.k * products, bytes};
}

namespace {

// matmul's blocks (matmul.cc: B micro-panel in L1, A block in L2, B block in L3), with a
// narrower B block: an expert's few rows use each packed B block once, so it should still be
// in L2 when the register tiles read it (kc x nc floats = 1 MB at kc = 512, nc = 512).
MatmulCpuConfig heuristic_config(Isa isa, bool bf16_dot) {
  MatmulTile tile = matmul_tile(isa, 0, bf16_dot);
  MatmulCpuConfig config;
  config.kc = bf16_dot || isa != Isa::avx512 ? 512 : 256;
  config.mc = tile.mr * (isa == Isa::scalar ? 16 : 24);
  config.nc = 512;
  config.microkernel = 0;
  return config;
}

// The in-place index (as matmul's): x's rows (forward) or dy's (dx) read in place, B packed one
// panel over all of K at a time; mc, kc and nc (heuristic_config's) block only dw, which runs the
// BLIS path with the same 6 x 64 tile.
MatmulTile in_place_tile(Isa isa, bool bf16_dot) {
  return bf16_dot ? matmul_bf16_in_place_tile(isa) : matmul_in_place_tile(isa);
}

MatmulCpuConfig in_place_config(Isa isa, bool bf16_dot) {
  MatmulCpuConfig config = heuristic_config(isa, bf16_dot);
  config.mc = in_place_tile(isa, bf16_dot).mr * 24;
  config.microkernel = matmul_in_place_variant(isa);
  return config;
}

// Where the heuristics take the in-place index on AVX-512 (f32 and the bf16 pair path; measured
// on Zen 4 with --vs-config, docs/perf.md): every backward (dx and dw 7-35% faster at the bench's
// five shapes) and the forwards with at least 64 rows per expert on average (Mixtral-8x7B-scaled,
// 128: 12-18% faster). With 16-32 rows per expert most experts take the unpacked path, and the
// forward was 3-10% slower (Qwen3-30B-A3B, OLMoE; the BLIS path with the same 6-row tile was
// as slow, so the 6-row split, not the in-place read, costs there) or 4-8% faster (Mixtral-8x7B,
// K 4096): not taken.
constexpr int64_t kInPlaceForwardRowsPerExpert = 64;

MatmulCpuConfig forward_heuristic(const GroupedMatmulArgs& args, Isa isa, bool bf16_dot) {
  const GroupedGeometry g = geometry_of(args.x, args.w);
  if (isa >= Isa::avx512 && g.rows >= kInPlaceForwardRowsPerExpert * g.experts) return in_place_config(isa, bf16_dot);
  return heuristic_config(isa, bf16_dot);
}

MatmulCpuConfig backward_heuristic(Isa isa, bool bf16_dot) {
  return isa >= Isa::avx512 ? in_place_config(isa, bf16_dot) : heuristic_config(isa, bf16_dot);
}

std::vector<MatmulCpuConfig> config_space(Isa isa, bool bf16_dot) {
  std::vector<MatmulCpuConfig> configs;
  for (int64_t variant = 0; variant < matmul_tile_count(isa, bf16_dot); ++variant) {
    MatmulTile tile = matmul_tile(isa, variant, bf16_dot);
    // A tiny blocking first: it exercises every block boundary on small test shapes.
    configs.push_back({tile.mr, 24, tile.nr * 2, variant});
    for (int64_t kc : {128, 256, 384, 512})
      for (int64_t mc_tiles : {8, 24, 48})
        for (int64_t nc : {256, 512, 1024, 4096}) configs.push_back({tile.mr * mc_tiles, kc, nc, variant});
  }
  // The in-place index: a tiny blocking (dw's block edges on test shapes), and kc 256 and 512.
  const MatmulCpuConfig in_place = in_place_config(isa, bf16_dot);
  const MatmulTile tile = in_place_tile(isa, bf16_dot);
  configs.push_back({tile.mr, 24, tile.nr * 2, in_place.microkernel});
  for (int64_t kc : {256, 512}) configs.push_back({in_place.mc, kc, 512, in_place.microkernel});
  return configs;
}

std::string grouped_shape_key(const TensorView& x, const TensorView& w, const TensorView& dy_or_null, bool accumulate,
                              const char* extra = "") {
  GroupedGeometry g = geometry_of(x, w);
  return str_cat("rows=", g.rows, ",experts=", g.experts, ",n=", g.n, ",k=", g.k, ",dtype=", dtype_name(x.dtype),
                 dy_or_null.rank() ? str_cat(",dy=", dtype_name(dy_or_null.dtype)) : "",
                 ",accumulate=", int(accumulate), extra);
}

// AMX: matmul's tile blocks with its narrower B block (kc x nc bf16 = 512 KB at kc = 512,
// nc = 512), as for the vector paths. Not yet measured on an AMX machine.
MatmulCpuConfig amx_heuristic_config() { return {256, 512, 512, 0}; }

// amx, avx512_bf16, the per-ISA paths, amx_emulated: the tile and pair paths for bf16 operands.
template <class Args>
std::vector<Impl<Args, MatmulCpuConfig>> grouped_impls(KernelFunction<Args, MatmulCpuConfig> bf16_dot_kernel,
                                                       KernelFunction<Args, MatmulCpuConfig> amx_kernel,
                                                       KernelFunction<Args, MatmulCpuConfig> amx_emulated_kernel,
                                                       std::function<bool(const Args&)> bf16_operands,
                                                       std::vector<Impl<Args, MatmulCpuConfig>> isa_paths) {
  std::vector<Impl<Args, MatmulCpuConfig>> impls;
  impls.push_back(amx_impl<Args, MatmulCpuConfig>(false, bf16_operands, amx_heuristic_config(), matmul_amx_config_space,
                                                  amx_kernel, amx_emulated_kernel));
  Impl<Args, MatmulCpuConfig> bf16_dot;
  bf16_dot.name = "avx512_bf16";
  bf16_dot.isa = Isa::avx512_bf16;
  bf16_dot.supported = bf16_operands;
  bf16_dot.heuristic = [](const Args& args) {
    if constexpr (std::is_same_v<Args, GroupedMatmulArgs>) return forward_heuristic(args, Isa::avx512_bf16, true);
    else return backward_heuristic(Isa::avx512_bf16, true);
  };
  bf16_dot.space = [](const Args&) { return config_space(Isa::avx512_bf16, true); };
  bf16_dot.run = bf16_dot_kernel;
  impls.push_back(std::move(bf16_dot));
  for (auto& impl : isa_paths) impls.push_back(std::move(impl));
  impls.push_back(amx_impl<Args, MatmulCpuConfig>(true, bf16_operands, amx_heuristic_config(), matmul_amx_config_space,
                                                  amx_kernel, amx_emulated_kernel));
  return impls;
}

}  // namespace

std::vector<int64_t> grouped_matmul_offsets(const TensorView& group_offsets) {
  if (group_offsets.device == Device::cpu) return to_vector<int64_t>(group_offsets);
  const Tensor host = cuda::to_host(group_offsets);
  return to_vector<int64_t>(host.view());
}

const Op<GroupedMatmulArgs, MatmulCpuConfig>& grouped_matmul_op() {
  static const Op<GroupedMatmulArgs, MatmulCpuConfig> op(
      "grouped_matmul",
      with_cuda_impl(grouped_impls<GroupedMatmulArgs>(
          avx512::grouped_matmul_bf16_dot_kernel, avx512::grouped_matmul_amx_kernel, scalar::grouped_matmul_amx_kernel,
          [](const GroupedMatmulArgs& args) { return args.x.dtype == DType::bf16; },
          LATHE_ISA_IMPLS(
              grouped_matmul_kernel,
              [](const GroupedMatmulArgs& args, Isa isa) { return forward_heuristic(args, isa, false); },
              [](const GroupedMatmulArgs&, Isa isa) { return config_space(isa, false); })),
          LATHE_CUDA_IMPL(grouped_matmul_cuda_impl)),
      [](const GroupedMatmulArgs& args) { return grouped_shape_key(args.x, args.w, TensorView{}, args.accumulate); });
  return op;
}

const Op<GroupedMatmulBackwardArgs, MatmulCpuConfig>& grouped_matmul_backward_op() {
  static const Op<GroupedMatmulBackwardArgs, MatmulCpuConfig> op(
      "grouped_matmul_backward",
      with_cuda_impl(grouped_impls<GroupedMatmulBackwardArgs>(
          avx512::grouped_matmul_backward_bf16_dot_kernel, avx512::grouped_matmul_backward_amx_kernel,
          scalar::grouped_matmul_backward_amx_kernel,
          [](const GroupedMatmulBackwardArgs& args) {
            return args.x.dtype == DType::bf16 && args.dy.dtype == DType::bf16;
          },
          LATHE_ISA_IMPLS(
              grouped_matmul_backward_kernel,
              [](const GroupedMatmulBackwardArgs&, Isa isa) { return backward_heuristic(isa, false); },
              [](const GroupedMatmulBackwardArgs&, Isa isa) { return config_space(isa, false); })),
          LATHE_CUDA_IMPL(grouped_matmul_backward_cuda_impl)),
      [](const GroupedMatmulBackwardArgs& args) {
        return grouped_shape_key(args.x, args.w, args.dy, args.accumulate_dw,
                                 args.dx.data && args.dw.data ? ""
                                 : args.dx.data               ? ",only=dx"
                                                              : ",only=dw");
      });
  return op;
}

void grouped_matmul(const GroupedMatmulArgs& args, const Dispatch& dispatch) {
  validate(args);
  grouped_matmul_op().run(args, dispatch);
}

void grouped_matmul_backward(const GroupedMatmulBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  grouped_matmul_backward_op().run(args, dispatch);
}

}  // namespace lathe
