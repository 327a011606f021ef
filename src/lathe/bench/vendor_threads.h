// The vendor libraries lathe is compared with run on their own thread pools: oneDNN through the
// OpenMP runtime, OpenBLAS through its own. Both default to every core, whatever `--threads`
// says, so a comparison at `--threads 1` would time one lathe thread against two vendor threads.
// The timing harnesses call match_vendor_threads() first: the suite's and the kernel lab's
// time_interleaved (suite_judge.h), and the op benchmark's peer rows (op_bench.cc).
#pragma once

namespace lathe {

// Sets the OpenMP runtime's and OpenBLAS's thread counts to lathe's num_threads(). Each setter is
// looked up in the loaded libraries (dlsym), so a build without oneDNN or OpenBLAS, or an
// OpenBLAS without the call, simply has nothing to set.
void match_vendor_threads();

}  // namespace lathe
