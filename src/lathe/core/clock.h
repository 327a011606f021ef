// The one clock and the one median every layer uses: monotonic seconds for timing steps, phases
// and benchmarks (never the wall clock, which can jump), and the median of measured samples.
#pragma once

#include <vector>

namespace lathe {

// Seconds on the monotonic (steady) clock from an arbitrary origin: only differences mean anything.
double now_seconds();

// now_seconds() - start.
double seconds_since(double start);

// The middle of the sorted samples; for an even count the mean of the two middle values (the upper
// one alone, used before, made a two-round `bench train --rounds 2` print its better round's
// ratio as the median). 0 for no samples.
double median(std::vector<double> samples);

}  // namespace lathe
