// Writes a TensorBoard event file with known scalars and one text summary into the directory given
// as the only argument, for tests/python/check_tensorboard.py to read with TensorBoard's own
// reader. The values here and in the Python script must agree: each is derived from a formula
// both sides compute (see sample_value), so there is one definition per side, not a copied table.
#include <cmath>
#include <cstdio>
#include <exception>

#include "lathe/telemetry/tensorboard_writer.h"

namespace {

// Tag t, step s: covers negatives, fractions that do not fit a float exactly, and huge values.
double sample_value(int tag, int64_t step) {
  switch (tag) {
    case 0:
      return 10.0 / (1.0 + static_cast<double>(step));  // train/loss
    case 1:
      return -0.5 * static_cast<double>(step) + 0.1;  // train/negative
    default:
      return std::pow(10.0, static_cast<double>(step % 60) - 25.0);  // eval/huge: 1e-25 .. 1e34
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tensorboard_sample LOG_DIR\n");
    return 2;
  }
  try {
    lathe::TensorBoardWriter writer(argv[1]);
    const char* tags[] = {"train/loss", "train/negative", "eval/huge"};
    for (int64_t step = 0; step < 60; ++step)
      for (int tag = 0; tag < 3; ++tag)
        if (tag != 2 || step % 3 == 0)
          writer.add_scalar(tags[tag], sample_value(tag, step * 7), step * 7, 1.7e9 + step);
    writer.add_text("config", "model:\n  d_model: 64", 0, 1.7e9);
    writer.close();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
  return 0;
}
