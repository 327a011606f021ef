// Which lathe this is: the project version and the git commit it was built from, baked in when
// CMake configures (cmake/version.cmake; "unknown" commit outside a git checkout). Recorded in run
// directories, checkpoint manifests and benchmark reports so a result names the code behind it.
#pragma once

#include <string>

namespace lathe {

const char* lathe_version();     // "0.1.0"
const char* lathe_git_commit();  // "1a2b3c4d5e6f" (12 hex digits), or "unknown"

// "lathe 0.1.0 (commit 1a2b3c4d5e6f)": what `lathe --version` prints.
std::string lathe_version_line();

}  // namespace lathe
