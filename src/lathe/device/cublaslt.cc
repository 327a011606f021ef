// Built with the CUDA backend only (the header includes cuBLASLt's).
#if LATHE_HAVE_CUDA

#include "lathe/device/cublaslt.h"

#include <string>

#include "lathe/core/error.h"
#include "lathe/device/shared_library.h"

namespace lathe::cuda {
namespace {

struct Loaded {
  CublasLt api{};
  std::string path, error;  // error: why loading failed ("" when it worked)
};

Loaded load() {
  SharedLibrary library = load_shared_library(
      {LATHE_CUBLASLT_SONAME, str_cat(LATHE_CUBLASLT_DIR, "/", LATHE_CUBLASLT_SONAME)}, "cuBLASLt");
  Loaded loaded;
  CublasLt& api = loaded.api;
#define LATHE_RESOLVE(name) resolve_symbol(library, #name, "cuBLASLt", api.name);
  LATHE_CUBLASLT_ENTRY_POINTS(LATHE_RESOLVE)
#undef LATHE_RESOLVE
  loaded.path = library.path;
  loaded.error = library.error;
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
