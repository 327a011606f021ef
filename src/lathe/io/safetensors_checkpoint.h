// Hugging Face safetensors checkpoints that may be split into shards:
//   <dir>/model.safetensors                       one file, or
//   <dir>/model.safetensors.index.json            {"metadata": {"total_size": N},
//                                                  "weight_map": {"<tensor>": "<shard file>", ...}}
//   <dir>/model-00001-of-00003.safetensors ...    the shards the index names
//
// Reading (SafetensorsCheckpoint): open() parses and validates the index (valid JSON, a
// weight_map of strings, shard names that are plain file names inside the directory and exist)
// but maps no shard; each shard is mapped and validated (SafetensorsFile) on first use, and must
// then hold exactly the tensors the index assigns to it (which also rules out a tensor in two
// shards). validate_all() opens every shard at once. Tensors convert to the caller's dtype
// straight from the mapping (read_into), so a load never holds a second copy of the files.
// Not thread-safe (shards open lazily).
//
// Writing (write_safetensors_checkpoint): tensors in the given order fill shards of at most
// max_shard_bytes of tensor data (a larger tensor gets a shard of its own), named
// model-00001-of-0000N.safetensors, then the index is written last; a single shard is written as
// model.safetensors with no index. Earlier model.safetensors / index / model-*-of-*.safetensors
// files in the directory are removed so a reader never mixes two saves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lathe/io/safetensors.h"

namespace lathe {

constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
constexpr const char* kSafetensorsSingleName = "model.safetensors";

class SafetensorsCheckpoint {
 public:
  // path: a directory (its index when present, else its model.safetensors), an index file, or a
  // single .safetensors file. Throws lathe::Error naming the file (and tensor) at fault.
  static SafetensorsCheckpoint open(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor name, sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  // The tensor's dtype, shape and offsets (opens its shard); lathe::Error when absent.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // Converts the tensor into `destination` (contiguous, same shape; see SafetensorsFile::read_into).
  void read_into(const std::string& name, const TensorView& destination) const;
  Tensor read_as(const std::string& name, DType dtype) const;
  // Opens and cross-checks every shard now.
  void validate_all() const;
  // The shard files (one for an unsharded checkpoint).
  std::vector<std::string> shard_paths() const;

 private:
  struct Shard {
    std::string path;
    std::vector<std::string> names;         // as the index assigns them
    std::unique_ptr<SafetensorsFile> file;  // null until first use
  };
  const SafetensorsFile& shard_file(size_t shard) const;

  std::string path_;
  std::string index_path_;  // empty for a single file
  std::vector<std::string> names_;
  std::map<std::string, size_t> shard_of_;
  mutable std::vector<Shard> shards_;
};

// Writes `tensors` into `directory` (created if missing) as described above; max_shard_bytes 0
// means one file. Returns the files written (the index last). Throws lathe::Error (bad names, I/O).
std::vector<std::string> write_safetensors_checkpoint(const std::string& directory, const NamedTensorViews& tensors,
                                                      int64_t max_shard_bytes,
                                                      const std::map<std::string, std::string>& metadata = {});

// "2GB", "500MB", "64KB", "1000" (bytes; decimal units as transformers uses: 1GB = 1e9 bytes,
// GiB/MiB/KiB binary) -> bytes; lathe::Error naming `context` otherwise.
int64_t parse_byte_size(const std::string& text, const std::string& context);

}  // namespace lathe
