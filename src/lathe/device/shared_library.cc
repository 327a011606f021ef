#include "lathe/device/shared_library.h"

#include <dlfcn.h>

#include "lathe/core/error.h"

namespace lathe {

SharedLibrary load_shared_library(const std::vector<std::string>& candidates, const std::string& what) {
  SharedLibrary library;
  std::string tried;
  for (const std::string& candidate : candidates) {
    library.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library.handle) {
      library.path = candidate;
      return library;
    }
    const char* message = dlerror();
    tried += str_cat(tried.empty() ? "" : "; ", message ? message : candidate.c_str());
  }
  library.error = str_cat("cannot load ", what, " (", tried, ")");
  return library;
}

void* find_symbol(SharedLibrary& library, const char* name, const std::string& what) {
  if (!library.handle || !library.error.empty()) return nullptr;
  void* symbol = dlsym(library.handle, name);
  if (!symbol) library.error = str_cat(what, " at ", library.path, " has no ", name);
  return symbol;
}

}  // namespace lathe
