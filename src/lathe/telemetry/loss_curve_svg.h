// The loss curve as a picture: a self-contained SVG (no scripts, no external fonts or links) with
// the raw training loss drawn faintly, its exponential moving average drawn solid, validation
// losses as points joined by a line, axes with tick labels and gridlines, a legend and a title
// line with the latest numbers. Non-finite losses are skipped (and counted in the subtitle);
// when all losses are positive and span more than two decades the loss axis is logarithmic, so
// an early spike does not flatten the rest. Drawn by the line chart of telemetry/svg_chart.h. Very long runs are
// decimated to per-pixel min/max, which keeps spikes visible and the file small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/telemetry/svg_chart.h"  // choose_axis, ChartAxis

namespace lathe {

struct LossPoint {
  int64_t step;
  double loss;
};

std::string loss_curve_svg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& validation,
                           const std::string& title);

// Writes loss_curve_svg(...) to `path` atomically (temporary file + rename), so a viewer or a
// crash never sees half a picture. Errors throw lathe::Error naming the file.
void write_loss_curve_svg(const std::string& path, const std::vector<LossPoint>& train,
                          const std::vector<LossPoint>& validation, const std::string& title);

// The smoothing of the solid line, exposed for tests (the axes are svg_chart.h's choose_axis).
// Bias-corrected exponential moving average: out[i] = sum_j w^(i-j) (1-w) v[j] / (1 - w^(i+1)).
std::vector<double> exponential_moving_average(const std::vector<double>& values, double weight);

}  // namespace lathe
