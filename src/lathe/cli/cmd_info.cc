// `lathe info`: what this machine is and how fast it is, measured.
#include <cstdio>

#include "lathe/bench/machine_peaks.h"
#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/dist/nccl_communicator.h"

namespace lathe::cli {

int run_info(int argc, char** argv) {
  CommandLine command_line(
      "lathe info [options]",
      "Prints the CPU model and features, the instruction set dispatch will use, the thread\n"
      "count, and measures the peaks every roofline in lathe is computed against: f32 FMA\n"
      "throughput, bf16 dot-product throughput (AVX512_BF16), AMX tdpbf16ps throughput (where the CPU has\n"
      "AMX and the kernel grants the tile-data permission), streaming-copy (DRAM) bandwidth and the\n"
      "bandwidth of each data-cache level (sizes from sysfs, else sysconf). Also says whether the\n"
      "CUDA backend is compiled in, which GPU it can use, and whether NCCL (data parallelism across\n"
      "GPUs) can be loaded.");
  add_runtime_options(command_line);
  command_line.flag("json", "print one JSON object instead of text");
  command_line.flag("quick", "shorter measurement loops (less accurate)");
  command_line.flag("no-measure", "only print the CPU description");
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  const CpuFeatures& cpu = cpu_features();
  MachinePeaks peaks;
  if (!command_line.has("no-measure")) peaks = measure_machine_peaks(command_line.has("quick"));
  if (command_line.has("json")) {
    Json json = Json::object();
    json.set("cpu", cpu.model);
    json.set("vendor", cpu.vendor);
    json.set("features", cpu.flags_summary());
    json.set("detected_isa", amx_status().usable ? "amx" : isa_name(detected_isa()));
    json.set("active_isa", amx_active() ? "amx" : isa_name(active_isa()));
    json.set("amx", amx_status().summary);
    json.set("threads", num_threads());
    json.set("threads_source", num_threads_source());
    json.set("available_cpus", available_cpus());
    json.set("cuda", cuda::status_line());
    if (cuda::compiled()) json.set("nccl", nccl_status_line());
    if (!command_line.has("no-measure")) json.set("peaks", peaks.to_json());
    std::printf("%s\n", json.dump(2).c_str());
    return 0;
  }
  std::printf("cpu           %s (%s)\n", cpu.model.c_str(), cpu.vendor.c_str());
  std::printf("features      %s\n", cpu.flags_summary().c_str());
  std::printf("isa           detected %s, active %s\n", amx_status().usable ? "amx" : isa_name(detected_isa()),
              amx_active() ? "amx" : isa_name(active_isa()));
  std::printf("AMX           %s\n", amx_status().summary.c_str());
  std::printf("threads       %d (from %s; %d of %d logical cores available)\n", num_threads(), num_threads_source(),
              available_cpus(), cpu.logical_cores);
  std::printf("cuda          %s\n", cuda::status_line().c_str());
  if (cuda::compiled()) std::printf("nccl          %s\n", nccl_status_line().c_str());
  if (command_line.has("no-measure")) return 0;
  std::printf("f32 FMA peak  %.1f GFLOP/s (%s, all threads)\n", peaks.f32_gflops, peaks.isa.c_str());
  if (peaks.bf16_gflops > 0)
    std::printf("bf16 dot peak %.1f GFLOP/s (vdpbf16ps; %.2fx the f32 FMA rate on one thread, the loops alternated)\n",
                peaks.bf16_gflops, peaks.bf16_dot_speedup);
  else
    std::printf("bf16 dot peak n/a (no AVX512_BF16 at the active ISA)\n");
  if (peaks.amx_gflops > 0)
    std::printf("AMX peak      %.1f GFLOP/s (tdpbf16ps, all threads)\n", peaks.amx_gflops);
  else
    std::printf("AMX peak      n/a (%s)\n", amx_status().usable ? "not at the active ISA" : "AMX not usable here");
  std::printf("memory        %.1f GB/s (best of copy and in-place update; read + written bytes)\n", peaks.copy_gbytes);
  std::printf(
      "DRAM stream   %.1f GB/s (vector update/read far beyond the last cache; the higher of this and the\n"
      "              figure above is the DRAM floor of memory-bound kernels)\n",
      peaks.dram_stream_gbytes);
  for (const auto& level : peaks.caches)
    std::printf(
        "%-13s %.1f GB/s (%lld KiB, shared by %d CPUs: %lld KiB per thread; streaming update/read, all threads)\n",
        level.name.c_str(), level.gbytes, static_cast<long long>(level.size_bytes >> 10), level.shared_by,
        static_cast<long long>(level.bytes_per_thread >> 10));
  std::printf("cache sizes   from %s; a kernel's memory floor uses the smallest level its working set fits in\n",
              peaks.cache_source.c_str());
  return 0;
}

}  // namespace lathe::cli
