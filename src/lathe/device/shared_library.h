// Libraries loaded at run time (dlopen) instead of linked: the large or optional CUDA libraries
// (cuBLASLt, device/cublaslt.h; NCCL, dist/nccl_communicator.h), so a process that never calls
// them pays nothing at start and a machine without them still runs everything else.
#pragma once

#include <string>
#include <vector>

namespace lathe {

struct SharedLibrary {
  void* handle = nullptr;  // null when none of the candidates loaded
  std::string path;        // the candidate that loaded
  std::string error;       // "" while usable; else why not (one line)
};

// The first of `candidates` (a soname, then full paths) that dlopen loads (RTLD_NOW | RTLD_LOCAL);
// when none does, error is "cannot load <what> (<each loader message>)".
SharedLibrary load_shared_library(const std::vector<std::string>& candidates, const std::string& what);

// Looks `name` up in a loaded library into `into` (a function pointer of the declared type); the
// first missing symbol sets error to "<what> at <path> has no <name>". No-op once error is set.
void* find_symbol(SharedLibrary& library, const char* name, const std::string& what);
template <class Fn>
void resolve_symbol(SharedLibrary& library, const char* name, const std::string& what, Fn& into) {
  into = reinterpret_cast<Fn>(find_symbol(library, name, what));
}

}  // namespace lathe
