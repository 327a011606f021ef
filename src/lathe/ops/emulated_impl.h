// Implementations that run an emulation of instructions the CPU may lack (the AMX tile kernels on
// the scalar emulation of core/amx_tiles.h) are named with this suffix ("amx_emulated"). An op
// registers them after its scalar implementation, which supports every argument, so dispatch never
// reaches them; the op-contract tests check them on every machine like any implementation; tuning
// skips them (they are for testing the kernels' logic, not for speed).
#pragma once

#include <string>

namespace lathe {

inline constexpr const char* kEmulatedSuffix = "_emulated";

inline bool is_emulated_impl(const std::string& name) {
  const std::string suffix = kEmulatedSuffix;
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace lathe
