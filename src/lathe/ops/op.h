// The op contract. An op is a typed Args struct (shapes + options, validated), a float64 reference,
// one or more implementations, a FLOP/byte cost, and a dispatcher. A backward is a separate op
// with its own Args and Config.
//
//   Impl<Args, Config>  one implementation: name, device (cpu or cuda), required ISA (cpu),
//                       supported(args), heuristic(args), space(args) (every config the tuner may
//                       try), run(args, config).
//   Op<Args, Config>    the implementations in order of preference plus the shape key used by the
//                       tuning cache. op.run(args, dispatch) picks the first supported
//                       implementation (or the one named in dispatch.impl) and its config:
//                       config pinned for this call > pinned for the process > tuning cache >
//                       heuristic.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/tensor.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/simulated_memory.h"
#include "lathe/ops/config.h"
#include "lathe/ops/dispatch.h"
#include "lathe/ops/op_profile.h"

namespace lathe {

// Work and minimum memory traffic of one call, for rooflines.
struct OpCost {
  double flops = 0;  // floating point operations (an FMA counts 2)
  double bytes = 0;  // bytes that must cross memory at least once: inputs read + outputs written
  // Of flops, the bf16 products an op hands to matmul's dispatch (the fused LM head's): they run on
  // the engine matmul takes for bf16 (AMX tiles, vdpbf16ps, else the FMAs), whatever the op's own
  // implementation is.
  double matmul_bf16_flops = 0;
};

// Args of an op with a device implementation list their tensors, so dispatch can see where they
// live and the problem framework can mirror them onto the device for the contract tests:
//   template <class Visit> void visit_tensors(Visit&& visit) { visit(x); visit(weight); visit(y); }
template <class Args>
concept VisitsTensors = requires(Args& args) {
  args.visit_tensors([](TensorView&) {});
};

// The device of an op's tensors: cuda when any tensor given (data != null) is on the GPU. Args
// without visit_tensors are host-only.
template <class Args>
Device args_device(const Args& args) {
  if constexpr (VisitsTensors<Args>) {
    Device device = Device::cpu;
    Args copy = args;
    copy.visit_tensors([&](TensorView& view) {
      if (view.data != nullptr && view.device == Device::cuda) device = Device::cuda;
    });
    return device;
  } else {
    return Device::cpu;
  }
}

// Whether an implementation's device can run here: the CPU's ISA level, or a usable GPU.
inline bool device_runnable(Device device, Isa isa) {
  return device == Device::cpu ? isa_available(isa) : cuda::available();
}

template <class Args, class Config>
struct Impl {
  std::string name;                            // "avx512", "avx2", "scalar", "cuda", ...
  Device device = Device::cpu;                 // where its tensors must live
  Isa isa = Isa::scalar;                       // cpu implementations: the ISA level it needs
  std::function<bool(const Args&)> supported;  // empty: supports all valid args
  std::function<Config(const Args&)> heuristic;
  std::function<std::vector<Config>(const Args&)> space;
  std::function<void(const Args&, const Config&)> run;
  // A CUDA implementation made only of other ops' calls, device copies and fills (no kernel of its
  // own): the host simulation (device/cuda_runtime.h) runs it as it is, each op it calls simulated
  // in turn, so its own logic is tested on every machine (op_contract_test.cc).
  bool composite = false;

  // Runnable on this machine for args on any device (the problem framework mirrors host args).
  bool runnable_here(const Args& args) const {
    const bool simulated = composite && device == Device::cuda && cuda::host_simulation_active() &&
                           cuda::host_simulation_runs_composites();
    return (simulated || device_runnable(device, isa)) && (!supported || supported(args));
  }
  bool usable(const Args& args) const { return device == args_device(args) && runnable_here(args); }
};

// Where a call's config came from (reported by tools).
enum class ConfigSource { call, pinned, tuned, heuristic };
const char* config_source_name(ConfigSource source);
// Prints a one-time warning that a cached config is not valid for this build (defined in dispatch.cc).
void warn_stale_tuned_config(const std::string& context, const std::string& config);

template <class Args, class Config>
class Op {
 public:
  using ImplType = Impl<Args, Config>;

  Op(std::string name, std::vector<ImplType> impls, std::function<std::string(const Args&)> shape_key)
      : name_(std::move(name)), impls_(std::move(impls)), shape_key_(std::move(shape_key)) {}

  const std::string& name() const { return name_; }
  const std::vector<ImplType>& impls() const { return impls_; }
  std::string shape_key(const Args& args) const { return shape_key_(args); }

  // Usable implementations for these args on this machine, best first.
  std::vector<const ImplType*> usable_impls(const Args& args) const {
    const Device device = args_device(args);  // once, not per implementation
    std::vector<const ImplType*> usable;
    for (const auto& impl : impls_)
      if (impl.device == device && impl.runnable_here(args)) usable.push_back(&impl);
    return usable;
  }

  const ImplType& select_impl(const Args& args, const std::string& wanted = "") const {
    const Device device = args_device(args);  // once, not per implementation
    for (const auto& impl : impls_) {
      if (!wanted.empty() && impl.name != wanted) continue;
      if (impl.device == device && impl.runnable_here(args)) return impl;
      LATHE_CHECK(wanted.empty() || impl.device == device, name_, ": implementation '", wanted, "' runs on ",
                  device_name(impl.device), " tensors; these are on ", device_name(device));
      LATHE_CHECK(wanted.empty() || impl.device == Device::cpu, name_, ": implementation '", wanted,
                  "' is not usable here: ", cuda::available() ? "unsupported arguments" : cuda::unavailable_reason());
      LATHE_CHECK(wanted.empty(), name_, ": implementation '", wanted, "' is not usable here (needs ",
                  isa_name(impl.isa), ", active ISA is ", isa_name(active_isa()), ", or unsupported arguments)");
    }
    LATHE_CHECK(wanted.empty(), name_, ": no implementation named '", wanted, "' (have: ", impl_names(), ")");
    if (device == Device::cuda) {
      for (const auto& impl : impls_)
        if (impl.device == Device::cuda) cuda::require_available(name_);
      throw_error(name_, ": no CUDA implementation supports these arguments (tensors on the GPU)");
    }
    throw_error(name_, ": no implementation supports these arguments");
  }

  Config select_config(const ImplType& impl, const Args& args, const Dispatch& dispatch,
                       ConfigSource* source = nullptr) const {
    auto report = [&](ConfigSource s) {
      if (source) *source = s;
    };
    std::string context = name_ + ":" + impl.name;
    if (dispatch.config) {
      report(ConfigSource::call);
      return config_from_params<Config>(*dispatch.config, context);
    }
    const DispatchTable& table = dispatch_table();
    if (const ConfigParams* pinned = table.pinned(name_, impl.name)) {
      report(ConfigSource::pinned);
      Config config = config_from_params<Config>(*pinned, context);
      LATHE_CHECK(in_space(impl, args, *pinned), context, ": pinned config '", pinned->to_string(),
                  "' is not in this implementation's config space for ", shape_key(args), " (see `lathe tune ", name_,
                  " --list`)");
      return config;
    }
    if (!table.tuned_empty())
      if (const ConfigParams* tuned = table.tuned(name_, impl.name, shape_key(args))) {
        // A cache written by an older build may hold configs this build no longer offers:
        // those are ignored (with one warning), never trusted blindly.
        if (in_space(impl, args, *tuned)) {
          report(ConfigSource::tuned);
          return config_from_params<Config>(*tuned, context);
        }
        warn_stale_tuned_config(context, tuned->to_string());
      }
    report(ConfigSource::heuristic);
    return impl.heuristic(args);
  }

  // Validates nothing itself but the tensors' device (each op's public entry validates its
  // Args, then calls run).
  void run(const Args& args, const Dispatch& dispatch = {}) const {
    if constexpr (VisitsTensors<Args>) {
      check_one_device(args);
      // A test's host simulation of the GPU (device/cuda_runtime.h): the CPU implementation on
      // the same (host) memory; a composite CUDA implementation runs itself, its ops simulated.
      if (cuda::host_simulation_active() && args_device(args) == Device::cuda) {
        require_cuda_impl_for(args);  // what a GPU would run, where this build has CUDA implementations
        for (const auto& impl : impls_)
          if (impl.composite && cuda::host_simulation_runs_composites() && impl.runnable_here(args) &&
              (dispatch.impl.empty() || dispatch.impl == impl.name))
            return impl.run(args, select_config(impl, args, dispatch));
        cuda::SimulatedDeviceAccess access;  // its device pages open while the CPU implementation runs
        return run(as_host_args(args, access), dispatch);
      }
    }
    if (op_profiling_enabled() && !OpProfileScope::nested()) {
      OpProfileScope scope;  // ops this op calls (e.g. matmul inside cross-entropy) count as its time
      const auto start = std::chrono::steady_clock::now();
      const ImplType& impl = select_impl(args, dispatch.impl);
      impl.run(args, select_config(impl, args, dispatch));
      record_op_time(name_.c_str(), op_profiling_by_shape() ? shape_key(args) : std::string(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return;
    }
    const ImplType& impl = select_impl(args, dispatch.impl);
    impl.run(args, select_config(impl, args, dispatch));
  }

  static bool in_space(const ImplType& impl, const Args& args, const ConfigParams& params) {
    for (const Config& candidate : impl.space(args))
      if (config_to_params(candidate) == params) return true;
    return false;
  }

  // lathe::Error "matmul: tensors on both cpu and cuda (a: f32(2, 3), c: cuda:f32(2, 4) ...)".
  void check_one_device(const Args& args) const {
    bool host = false, device = false;
    std::string described;
    Args copy = args;
    copy.visit_tensors([&](TensorView& view) {
      if (view.data == nullptr) return;
      (view.device == Device::cpu ? host : device) = true;
      described += (described.empty() ? "" : ", ") + view.describe();
    });
    LATHE_CHECK(!(host && device), name_, ": tensors on both the host and the GPU (", described,
                "); copy them to one device first (device/device_tensor.h)");
  }

  // The host simulation runs the CPU implementation, but a GPU would run a CUDA one: in a build
  // with them, one must exist and accept these arguments (its own supported() check; the device
  // itself is what the simulation stands in for). Throws lathe::Error otherwise.
  void require_cuda_impl_for(const Args& args) const {
    if (!cuda::compiled()) return;
    for (const auto& impl : impls_)
      if (impl.device == Device::cuda && (!impl.supported || impl.supported(args))) return;
    throw_error(name_, ": no CUDA implementation supports these arguments (tensors on the simulated GPU)");
  }

  // The args with every tensor tagged as host memory (the host simulation's device tensors are),
  // their pages opened to host access through `access`.
  static Args as_host_args(const Args& args, cuda::SimulatedDeviceAccess& access) {
    Args host = args;
    host.visit_tensors([&](TensorView& view) {
      access.open(view);
      view.device = Device::cpu;
    });
    return host;
  }

  std::string impl_names() const {
    std::string names;
    for (const auto& impl : impls_) names += (names.empty() ? "" : ", ") + impl.name;
    return names;
  }

 private:
  std::string name_;
  std::vector<ImplType> impls_;
  std::function<std::string(const Args&)> shape_key_;
};

// Kernel files compiled per ISA (lathe_add_isa_kernels) define plain kernel functions
//   void NAME(const Args&, const Config&)
// in namespace lathe::<isa>. The op's baseline file declares them with LATHE_DECLARE_ISA_KERNEL
// and wraps them into Impls with isa_impls(); heuristics and config spaces live in the baseline
// file too, so no std template is instantiated under AVX-512 flags.
#define LATHE_DECLARE_ISA_KERNEL(name, ArgsType, ConfigType) \
  namespace avx512 {                                         \
  void name(const ArgsType&, const ConfigType&);             \
  }                                                          \
  namespace avx2 {                                           \
  void name(const ArgsType&, const ConfigType&);             \
  }                                                          \
  namespace scalar {                                         \
  void name(const ArgsType&, const ConfigType&);             \
  }

template <class Args, class Config>
using KernelFunction = void (*)(const Args&, const Config&);

// The avx512, avx2 and scalar implementations of one kernel, best first. `heuristic` and `space`
// receive the ISA so they can scale tiles with the vector width.
template <class Args, class Config>
std::vector<Impl<Args, Config>> isa_impls(
    KernelFunction<Args, Config> avx512_kernel, KernelFunction<Args, Config> avx2_kernel,
    KernelFunction<Args, Config> scalar_kernel, std::type_identity_t<std::function<Config(const Args&, Isa)>> heuristic,
    std::type_identity_t<std::function<std::vector<Config>(const Args&, Isa)>> space) {
  std::vector<Impl<Args, Config>> impls;
  std::pair<Isa, KernelFunction<Args, Config>> kernels[] = {
      {Isa::avx512, avx512_kernel}, {Isa::avx2, avx2_kernel}, {Isa::scalar, scalar_kernel}};
  for (auto [isa, kernel] : kernels) {
    Impl<Args, Config> impl;
    impl.name = isa_name(isa);
    impl.isa = isa;
    impl.heuristic = [heuristic, isa](const Args& args) { return heuristic(args, isa); };
    impl.space = [space, isa](const Args& args) { return space(args, isa); };
    impl.run = kernel;
    impls.push_back(std::move(impl));
  }
  return impls;
}

// The CPU implementations plus, in builds with the CUDA backend, the op's CUDA one:
//   with_cuda_impl(LATHE_ISA_IMPLS(...), LATHE_CUDA_IMPL(rms_norm_cuda_impl))
// The factory is defined in the op's *_cuda.cc only in such builds; elsewhere LATHE_CUDA_IMPL
// gives null and nothing refers to it.
template <class Args, class Config>
std::vector<Impl<Args, Config>> with_cuda_impl(std::vector<Impl<Args, Config>> impls,
                                               std::type_identity_t<Impl<Args, Config> (*)()> cuda_impl) {
  static_assert(VisitsTensors<Args>, "an op with a CUDA implementation lists its tensors (Args::visit_tensors)");
  if (cuda_impl) impls.push_back(cuda_impl());
  return impls;
}
// The same with the CUDA kernels' host emulations (an op's *_cuda_emulated.cc, built where the
// toolkit is: ops/cuda_emulated_impl.h, device/simt_launcher.h) between the CPU implementations and
// the CUDA one:
//   with_cuda_impl(LATHE_ISA_IMPLS(...), LATHE_CUDA_IMPL(rms_norm_cuda_emulated_impls),
//                  LATHE_CUDA_IMPL(rms_norm_cuda_impl))
template <class Args, class Config>
std::vector<Impl<Args, Config>> with_cuda_impl(std::vector<Impl<Args, Config>> impls,
                                               std::type_identity_t<std::vector<Impl<Args, Config>> (*)()> emulated,
                                               std::type_identity_t<Impl<Args, Config> (*)()> cuda_impl) {
  if (emulated)
    for (auto& impl : emulated()) impls.push_back(std::move(impl));
  return with_cuda_impl(std::move(impls), cuda_impl);
}
// A CUDA implementation whose config is not used on the GPU (its space is the default alone).
template <class Args, class Config>
Impl<Args, Config> default_config_cuda_impl(KernelFunction<Args, Config> run) {
  Impl<Args, Config> impl;
  impl.name = "cuda";
  impl.device = Device::cuda;
  impl.heuristic = [](const Args&) { return Config{}; };
  impl.space = [](const Args&) { return std::vector<Config>{Config{}}; };
  impl.run = run;
  return impl;
}
#if LATHE_HAVE_CUDA
#define LATHE_CUDA_IMPL(factory) (&(factory))
#else
#define LATHE_CUDA_IMPL(factory) nullptr
#endif

#define LATHE_ISA_IMPLS(kernel, heuristic, space) \
  ::lathe::isa_impls(avx512::kernel, avx2::kernel, scalar::kernel, heuristic, space)

}  // namespace lathe
