// Built with the CUDA backend only (the header includes cuBLASLt's).
#if LATHE_HAVE_CUDA

#include "lathe/device/cublaslt.h"

#include <dlfcn.h>

#include <string>

#include "lathe/core/error.h"

namespace lathe::cuda {
namespace {

struct Loaded {
  CublasLt api{};
  std::string path, error;  // error: why loading failed ("" when it worked)
};

template <class Fn>
void resolve(void* library, const char* name, Fn& into, std::string& error) {
  into = reinterpret_cast<Fn>(dlsym(library, name));
  if (!into && error.empty()) error = str_cat("it has no ", name);
}

Loaded load() {
  Loaded loaded;
  const std::string candidates[] = {LATHE_CUBLASLT_SONAME, str_cat(LATHE_CUBLASLT_DIR, "/", LATHE_CUBLASLT_SONAME)};
  void* library = nullptr;
  std::string tried;
  for (const std::string& candidate : candidates) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      loaded.path = candidate;
      break;
    }
    const char* message = dlerror();
    tried += str_cat(tried.empty() ? "" : "; ", message ? message : candidate.c_str());
  }
  if (!library) {
    loaded.error = str_cat("cannot load cuBLASLt (", tried, ")");
    return loaded;
  }
  CublasLt& api = loaded.api;
  std::string error;
#define LATHE_RESOLVE(name) resolve(library, #name, api.name, error);
  LATHE_CUBLASLT_ENTRY_POINTS(LATHE_RESOLVE)
#undef LATHE_RESOLVE
  if (!error.empty()) loaded.error = str_cat("cuBLASLt at ", loaded.path, " is unusable: ", error);
  return loaded;
}

const Loaded& loaded_once() {
  static const Loaded instance = load();
  return instance;
}

}  // namespace

const CublasLt& cublaslt() {
  const Loaded& loaded = loaded_once();
  if (!loaded.error.empty()) throw_error(loaded.error);
  return loaded.api;
}

const char* cublaslt_path() { return loaded_once().path.c_str(); }

}  // namespace lathe::cuda

#endif  // LATHE_HAVE_CUDA
