#include "lathe/io/safetensors_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "lathe/core/json.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/tensor_bytes.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

// A shard name must name a file inside the checkpoint's directory: no path separators, no "..".
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.path_ = path;
  std::error_code error;
  std::string index_path;
  if (fs::is_directory(path, error)) {
    const std::string index = (fs::path(path) / kSafetensorsIndexName).string();
    const std::string single = (fs::path(path) / kSafetensorsSingleName).string();
    if (fs::exists(index, error)) {
      index_path = index;
    } else {
      LATHE_CHECK(fs::exists(single, error), path, ": no ", kSafetensorsIndexName, " or ", kSafetensorsSingleName);
      index_path.clear();
      checkpoint.path_ = single;
    }
  } else if (ends_with(path, ".json")) {
    index_path = path;
  }

  if (index_path.empty()) {  // one file: its own shard, opened (and validated) right away
    Shard shard;
    shard.path = checkpoint.path_;
    shard.file = std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard.path));
    shard.names = shard.file->names();
    for (const std::string& name : shard.names) checkpoint.shard_of_[name] = 0;
    checkpoint.shards_.push_back(std::move(shard));
  } else {
    checkpoint.index_path_ = index_path;
    Json index;
    try {
      index = Json::parse(read_file_contents(index_path));
    } catch (const Error& parse_error) {
      throw parse_error.with_context(index_path);
    }
    LATHE_CHECK(index.is_object(), index_path, ": the index must be a JSON object");
    const Json* weight_map = index.find("weight_map");
    LATHE_CHECK(weight_map && weight_map->is_object(), index_path, ": missing object \"weight_map\"");
    LATHE_CHECK(weight_map->size() > 0, index_path, ": \"weight_map\" is empty");
    if (const Json* metadata = index.find("metadata"))
      LATHE_CHECK(metadata->is_object() || metadata->is_null(), index_path, ": \"metadata\" must be an object");
    const fs::path directory = fs::path(index_path).parent_path();
    std::map<std::string, size_t> shard_by_file;
    for (const auto& [name, file] : weight_map->members()) {
      LATHE_CHECK(file.is_string(), index_path, ": tensor \"", name, "\" maps to ", file.dump(0),
                  ", expected a shard file name");
      const std::string& file_name = file.as_string();
      LATHE_CHECK(is_plain_file_name(file_name), index_path, ": tensor \"", name, "\" maps to \"", file_name,
                  "\", which points outside the checkpoint directory");
      auto [entry, inserted] = shard_by_file.emplace(file_name, checkpoint.shards_.size());
      if (inserted) {
        Shard shard;
        shard.path = (directory / file_name).string();
        LATHE_CHECK(fs::is_regular_file(shard.path, error), index_path, ": shard \"", file_name, "\" (tensor \"", name,
                    "\") does not exist");
        checkpoint.shards_.push_back(std::move(shard));
      }
      checkpoint.shards_[entry->second].names.push_back(name);
      LATHE_CHECK(checkpoint.shard_of_.emplace(name, entry->second).second, index_path, ": tensor \"", name,
                  "\" is listed twice");
    }
  }
  for (const auto& [name, shard] : checkpoint.shard_of_) checkpoint.names_.push_back(name);
  return checkpoint;
}

const SafetensorsFile& SafetensorsCheckpoint::shard_file(size_t index) const {
  Shard& shard = shards_[index];
  if (shard.file) return *shard.file;
  auto file = std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard.path));
  // The shard must hold exactly what the index assigns to it.
  std::set<std::string> expected(shard.names.begin(), shard.names.end());
  for (const std::string& name : file->names()) {
    if (expected.count(name)) continue;
    auto owner = shard_of_.find(name);
    if (owner == shard_of_.end()) throw_error(shard.path, ": tensor \"", name, "\" is not listed in ", index_path_);
    throw_error(shard.path, ": tensor \"", name, "\" is also here, but ", index_path_, " maps it to ",
                fs::path(shards_[owner->second].path).filename().string());
  }
  for (const std::string& name : shard.names)
    LATHE_CHECK(file->find(name), index_path_, ": tensor \"", name, "\" is mapped to ", shard.path,
                ", which does not contain it");
  shard.file = std::move(file);
  return *shard.file;
}

const SafetensorsTensorInfo& SafetensorsCheckpoint::info(const std::string& name) const {
  auto found = shard_of_.find(name);
  LATHE_CHECK(found != shard_of_.end(), path_, ": no tensor \"", name, "\"");
  return shard_file(found->second).info(name);
}

void SafetensorsCheckpoint::read_into(const std::string& name, const TensorView& destination) const {
  auto found = shard_of_.find(name);
  LATHE_CHECK(found != shard_of_.end(), path_, ": no tensor \"", name, "\"");
  shard_file(found->second).read_into(name, destination);
}

Tensor SafetensorsCheckpoint::read_as(const std::string& name, DType dtype) const {
  Tensor out = Tensor::empty(info(name).shape, dtype);
  read_into(name, out);
  return out;
}

void SafetensorsCheckpoint::validate_all() const {
  for (size_t shard = 0; shard < shards_.size(); ++shard) shard_file(shard);
}

std::vector<std::string> SafetensorsCheckpoint::shard_paths() const {
  std::vector<std::string> paths;
  for (const Shard& shard : shards_) paths.push_back(shard.path);
  return paths;
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

bool is_shard_file_name(const std::string& name) {
  // model-00001-of-00003.safetensors
  return name.rfind("model-", 0) == 0 && ends_with(name, ".safetensors") && name.find("-of-") != std::string::npos;
}

std::string shard_file_name(size_t index, size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buffer;
}

}  // namespace

std::vector<std::string> write_safetensors_checkpoint(const std::string& directory, const NamedTensorViews& tensors,
                                                      int64_t max_shard_bytes,
                                                      const std::map<std::string, std::string>& metadata) {
  LATHE_CHECK(max_shard_bytes >= 0, directory, ": max_shard_bytes must be >= 0, got ", max_shard_bytes);
  std::error_code error;
  fs::create_directories(directory, error);
  LATHE_CHECK(fs::is_directory(directory, error), "cannot create directory ", directory);

  // Greedy packing in the caller's order keeps each layer's tensors together, as transformers does.
  std::vector<NamedTensorViews> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& named : tensors) {
    const int64_t bytes = tensor_byte_size(named.second);
    if (max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(named);
    shard_bytes += bytes;
    total_bytes += bytes;
  }

  // Remove what an earlier save left, so the directory holds one checkpoint only.
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name == kSafetensorsIndexName || name == kSafetensorsSingleName || is_shard_file_name(name))
      fs::remove(entry.path(), error);
  }

  std::vector<std::string> written;
  std::map<std::string, std::string> file_metadata = metadata;
  file_metadata.emplace("format", "pt");  // what transformers expects in its own files
  if (shards.size() == 1) {
    const std::string path = (fs::path(directory) / kSafetensorsSingleName).string();
    write_safetensors(path, shards[0], file_metadata);
    written.push_back(path);
    return written;
  }
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(i, shards.size());
    const std::string path = (fs::path(directory) / name).string();
    write_safetensors(path, shards[i], file_metadata);
    written.push_back(path);
    for (const auto& named : shards[i]) weight_map.append_member(named.first, name);
  }
  Json index = Json::object();
  Json index_metadata = Json::object();
  index_metadata.set("total_size", total_bytes);
  index.set("metadata", std::move(index_metadata));
  index.set("weight_map", std::move(weight_map));
  const std::string index_path = (fs::path(directory) / kSafetensorsIndexName).string();
  write_file_atomically(index_path, index.dump(2) + "\n");
  written.push_back(index_path);
  return written;
}

int64_t parse_byte_size(const std::string& text, const std::string& context) {
  size_t digits_end = 0;
  while (digits_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits_end])) || text[digits_end] == '.'))
    ++digits_end;
  const std::string number = text.substr(0, digits_end);
  std::string unit = text.substr(digits_end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {{"", 1},         {"B", 1},           {"KB", 1e3},
                                                          {"MB", 1e6},     {"GB", 1e9},        {"TB", 1e12},
                                                          {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  double multiplier = -1;
  for (const auto& [name, value] : kUnits)
    if (unit == name) multiplier = value;
  char* end = nullptr;
  const double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  LATHE_CHECK(multiplier > 0 && value >= 0 && end && *end == '\0' && value * multiplier < 9.0e18, context, ": \"", text,
              "\" is not a size (expected e.g. 2GB, 500MB, 1GiB or a byte count)");
  return static_cast<int64_t>(value * multiplier);
}

}  // namespace lathe
