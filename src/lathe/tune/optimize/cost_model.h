// The cost model of `lathe optimize`: a predicted time for a fused GEMM schedule from its FLOPs,
// its bytes, its register tile and its cache footprints against the measured machine peaks
// (bench/machine_peaks.h). It only ranks candidates; the search corrects it by measurement
// (beam_search.h), so what matters is the order it gives, not its absolute figures.
//   compute: 2 m n k / (f32 peak x tile efficiency), the efficiency from FMAs per load of the
//            register tile, spills beyond the vector registers, tail waste, the dot form's
//            reductions and the L1 / L2 footprint of its blocks;
//   epilogue: its transcendental FLOPs at a fraction of peak, plus one read and write of y from
//            the cache level it lives in when it is a separate pass;
//   packing: one read and one strided write of w;  threads: a start-up cost per parallel region.
#pragma once

#include <cstdint>

#include "lathe/bench/machine_peaks.h"
#include "lathe/tune/optimize/fused_gemm_generator.h"

namespace lathe {

struct FusedGemmShape {
  int64_t m = 0, n = 0, k = 0;
};

// `limits` are the space's (the registers a tile may use before it spills): the search passes
// this machine's, tests a fixed machine's.
double predict_fused_gemm_seconds(const FusedGemmKernel& kernel, const FusedGemmShape& shape,
                                  const KernelSchedule& schedule, const MachinePeaks& peaks,
                                  const ScheduleLimits& limits);

}  // namespace lathe
