// Where a Hugging Face model named on the command line lives on disk, without network access.
//
//   resolve_hf_model_directory("path/to/dir")      the directory itself (when it exists)
//   resolve_hf_model_directory("org/name")         the snapshot of refs/main in the local Hugging
//   resolve_hf_model_directory("org/name@REV")     Face cache; REV is a branch or tag (refs/REV) or a
//                                                  commit hash (snapshots/REV)
// The cache is the one huggingface_hub fills: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, holding
// models--ORG--NAME/{refs/REV, snapshots/COMMIT/...}. lathe never downloads: a name missing from the
// cache is one lathe::Error naming the cache folder it looked in and the command that fetches it.
#pragma once

#include <string>

namespace lathe {

// The hub cache folder the rules above give (it need not exist).
std::string hf_hub_cache_directory();

// A local directory, or org/name[@rev] resolved through the cache (see above).
std::string resolve_hf_model_directory(const std::string& name_or_directory);

}  // namespace lathe
