#include "lathe/train/parallel/sharded_optimizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "lathe/core/parallel.h"
#include "lathe/device/device_tensor.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/ops/adamw/adamw.h"
#include "lathe/ops/cast/cast.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

constexpr const char* kIndexFile = "optimizer.index.json";
constexpr const char* kIndexFormat = "lathe-optimizer-shards";

std::string shard_file_name(int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof name, "optimizer.shard_%05d_of_%05d.safetensors", rank, world_size);
  return name;
}

int64_t flat_size(const std::vector<Parameter>& parameters) {
  int64_t total = 0;
  for (const Parameter& parameter : parameters) total += parameter.var->value.numel();
  return total;
}

// Rank r's first element: r * total / world (balanced to within one element).
int64_t shard_begin(int64_t total, int rank, int world_size) { return total * rank / world_size; }

// Copies the overlap of [source_begin, source_begin + source.size()) and [begin, end) into
// target (which covers [begin, end)).
void copy_overlap(const float* source, int64_t source_begin, int64_t source_length, std::vector<float>& target,
                  int64_t begin, int64_t end) {
  const int64_t from = std::max(begin, source_begin), to = std::min(end, source_begin + source_length);
  if (from >= to) return;
  std::memcpy(target.data() + (from - begin), source + (from - source_begin), static_cast<size_t>(to - from) * 4);
}

OptimizerMoments read_sharded_moments(const std::string& directory, const std::vector<Parameter>& parameters,
                                      int64_t begin, int64_t end) {
  const std::string index_path = directory + "/" + kIndexFile;
  const Json index = Json::parse(read_file_contents(index_path));
  auto fail = [&](const std::string& why) { throw_error("checkpoint ", directory, ": ", kIndexFile, ": ", why); };
  if (!index.is_object() || !index.find("format") || index.get("format").as_string() != kIndexFormat)
    fail(str_cat("\"format\" must be \"", kIndexFormat, "\""));
  const Json& listed = index.get("parameters");
  if (!listed.is_array() || listed.size() != parameters.size())
    fail(str_cat("lists ", listed.is_array() ? listed.size() : 0, " parameters, this model has ", parameters.size()));
  for (size_t i = 0; i < parameters.size(); ++i) {
    const std::string& name = listed.items()[i].items()[0].as_string();
    const int64_t numel = listed.items()[i].items()[1].as_int();
    if (name != parameters[i].name || numel != parameters[i].var->value.numel())
      fail(str_cat("parameter ", i, " is '", name, "' with ", numel, " elements, this model has '", parameters[i].name,
                   "' with ", parameters[i].var->value.numel()));
  }
  OptimizerMoments moments;
  moments.exp_avg.assign(static_cast<size_t>(end - begin), 0.0f);
  moments.exp_avg_sq.assign(static_cast<size_t>(end - begin), 0.0f);
  int64_t covered = 0;
  for (const Json& shard : index.get("shards").items()) {
    const int64_t shard_start = shard.get("begin").as_int(), shard_stop = shard.get("end").as_int();
    if (std::min(end, shard_stop) <= std::max(begin, shard_start)) continue;
    const std::string path = directory + "/" + shard.get("file").as_string();
    SafetensorsFile file = SafetensorsFile::open(path);
    for (auto [tensor_name, target] :
         {std::pair<const char*, std::vector<float>*>{"exp_avg", &moments.exp_avg},
          std::pair<const char*, std::vector<float>*>{"exp_avg_sq", &moments.exp_avg_sq}}) {
      const Tensor values = file.read_as(tensor_name, DType::f32);
      if (values.numel() != shard_stop - shard_start)
        fail(str_cat(path, ": '", tensor_name, "' has ", values.numel(), " elements, the index says ",
                     shard_stop - shard_start));
      copy_overlap(values.ptr<float>(), shard_start, values.numel(), *target, begin, end);
    }
    covered += std::min(end, shard_stop) - std::max(begin, shard_start);
  }
  if (covered != end - begin) fail(str_cat("the shards cover ", covered, " of elements [", begin, ", ", end, ")"));
  return moments;
}

}  // namespace

OptimizerMoments read_optimizer_moments(const LoadedCheckpoint& checkpoint, const std::vector<Parameter>& parameters,
                                        int64_t begin, int64_t end) {
  LATHE_ASSERT(0 <= begin && begin <= end && end <= flat_size(parameters));
  if (fs::exists(checkpoint.directory + "/" + kIndexFile))
    return read_sharded_moments(checkpoint.directory, parameters, begin, end);
  // An unsharded checkpoint: "<param>.exp_avg" tensors in optimizer.safetensors.
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : checkpoint.optimizer) by_name[name] = &tensor;
  OptimizerMoments moments;
  moments.exp_avg.assign(static_cast<size_t>(end - begin), 0.0f);
  moments.exp_avg_sq.assign(static_cast<size_t>(end - begin), 0.0f);
  int64_t parameter_begin = 0;
  for (const Parameter& parameter : parameters) {
    const int64_t numel = parameter.var->value.numel();
    if (std::min(end, parameter_begin + numel) > std::max(begin, parameter_begin)) {
      for (auto [suffix, target] : {std::pair<const char*, std::vector<float>*>{".exp_avg", &moments.exp_avg},
                                    std::pair<const char*, std::vector<float>*>{".exp_avg_sq", &moments.exp_avg_sq}}) {
        auto found = by_name.find(parameter.name + suffix);
        LATHE_CHECK(found != by_name.end(), "checkpoint ", checkpoint.directory, ": optimizer state has no tensor '",
                    parameter.name, suffix, "'");
        LATHE_CHECK(found->second->numel() == numel && found->second->dtype() == DType::f32, "checkpoint ",
                    checkpoint.directory, ": optimizer tensor '", parameter.name, suffix, "' is ",
                    found->second->view().describe(), ", expected ", numel, " f32 elements");
        copy_overlap(found->second->ptr<float>(), parameter_begin, numel, *target, begin, end);
      }
    }
    parameter_begin += numel;
  }
  return moments;
}

NamedTensors whole_optimizer_state(const LoadedCheckpoint& checkpoint, const std::vector<Parameter>& parameters) {
  if (!fs::exists(checkpoint.directory + "/" + kIndexFile)) return checkpoint.optimizer;
  const OptimizerMoments moments = read_optimizer_moments(checkpoint, parameters, 0, flat_size(parameters));
  NamedTensors state;
  int64_t offset = 0;
  for (const Parameter& parameter : parameters) {
    const int64_t numel = parameter.var->value.numel();
    for (auto [suffix, source] :
         {std::pair<const char*, const std::vector<float>*>{".exp_avg", &moments.exp_avg},
          std::pair<const char*, const std::vector<float>*>{".exp_avg_sq", &moments.exp_avg_sq}}) {
      Tensor tensor = Tensor::empty(parameter.var->value.shape(), DType::f32);
      std::memcpy(tensor.ptr<float>(), source->data() + offset, static_cast<size_t>(numel) * 4);
      state.emplace_back(parameter.name + suffix, std::move(tensor));
    }
    offset += numel;
  }
  return state;
}

ShardedAdamW::ShardedAdamW(std::vector<Parameter>& parameters, const OptimizerSection& config,
                           Communicator& communicator, int64_t gather_chunk_bytes)
    : parameters_(parameters), config_(config), communicator_(communicator) {
  const int world = communicator.world_size(), rank = communicator.rank();
  total_ = flat_size(parameters);
  begin_ = shard_begin(total_, rank, world);
  end_ = shard_begin(total_, rank + 1, world);
  int64_t parameter_begin = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    LATHE_ASSERT(parameters[i].var->value.dtype() == DType::f32);
    const int64_t numel = parameters[i].var->value.numel();
    const int64_t from = std::max(begin_, parameter_begin), to = std::min(end_, parameter_begin + numel);
    if (from < to) pieces_.push_back({i, from - parameter_begin, to - from, from});
    parameter_begin += numel;
  }
  // The moments and the gather buffer beside the weights (host memory, or the GPU's).
  const Device device = parameters.empty() ? Device::cpu : parameters.front().var->value.view().device;
  exp_avg_ = zeros_on(device, {end_ - begin_}, DType::f32, "exp_avg shard");
  exp_avg_sq_ = zeros_on(device, {end_ - begin_}, DType::f32, "exp_avg_sq shard");
  LATHE_ASSERT(gather_chunk_bytes >= 4);
  gather_buffer_ =
      empty_on(device, {std::max<int64_t>(1, std::min(total_, gather_chunk_bytes / 4))}, DType::f32, "gather buffer");
}

double ShardedAdamW::step(int64_t step, double lr) {
  const double norm = global_gradient_norm(parameters_);
  const float scale = gradient_clip_scale(norm, config_);
  std::vector<AdamWArgs> steps;  // one call for all: one launch per 32 tensors on a GPU
  for (const Piece& piece : pieces_) {
    const Parameter& parameter = parameters_[piece.parameter];
    if (!parameter_trains(parameter)) continue;
    const int64_t n = parameter.var->value.numel();
    auto part = [&](const Tensor& tensor) {
      return tensor.view().reshape({n}).slice(0, piece.offset, piece.offset + piece.length);
    };
    const int64_t state_offset = piece.flat_offset - begin_;
    AdamWArgs args;
    args.param = part(parameter.var->value);
    args.grad = part(parameter.var->grad);
    args.m = exp_avg_.view().slice(0, state_offset, state_offset + piece.length);
    args.v = exp_avg_sq_.view().slice(0, state_offset, state_offset + piece.length);
    if (parameter.var->value_bf16.defined()) args.param_bf16 = part(parameter.var->value_bf16);
    args.lr = static_cast<float>(lr);
    args.beta1 = static_cast<float>(config_.beta1);
    args.beta2 = static_cast<float>(config_.beta2);
    args.eps = static_cast<float>(config_.eps);
    args.weight_decay = parameter_decays(parameter, config_) ? static_cast<float>(config_.weight_decay) : 0.0f;
    args.step = step;
    args.grad_scale = scale;
    steps.push_back(args);
  }
  adamw_many(steps);
  gather_parameters();
  return norm;
}

void ShardedAdamW::gather_parameters() {
  // The flat vector in chunks of at most gather_buffer_ elements: inside a chunk every rank's part
  // is contiguous and in rank order, so one all-gather per chunk fills it.
  const int world = communicator_.world_size();
  const int64_t chunk_elements = gather_buffer_.numel();
  std::vector<int64_t> counts(static_cast<size_t>(world));
  for (int64_t chunk_begin = 0; chunk_begin < total_; chunk_begin += chunk_elements) {
    const int64_t chunk_end = std::min(total_, chunk_begin + chunk_elements);
    for (int r = 0; r < world; ++r) {
      const int64_t from = std::max(chunk_begin, shard_begin(total_, r, world));
      const int64_t to = std::min(chunk_end, shard_begin(total_, r + 1, world));
      counts[r] = std::max<int64_t>(0, to - from);
    }
    const TensorView chunk = gather_buffer_.view().slice(0, 0, chunk_end - chunk_begin);
    // Copy this rank's elements of the chunk in, gather, copy the others' out (and round their
    // bf16 copies as the adamw op rounds ours: nearest-even, by the cast op on their device).
    auto visit = [&](int64_t from, int64_t to, bool into_buffer) {
      int64_t parameter_begin = 0;
      for (const Parameter& parameter : parameters_) {
        const int64_t numel = parameter.var->value.numel();
        const int64_t lo = std::max(from, parameter_begin), hi = std::min(to, parameter_begin + numel);
        if (lo < hi) {
          auto part = [&](const Tensor& tensor) {
            return tensor.view().reshape({numel}).slice(0, lo - parameter_begin, hi - parameter_begin);
          };
          const TensorView buffer = chunk.slice(0, lo - chunk_begin, hi - chunk_begin);
          if (into_buffer) {
            cuda::copy(buffer, part(parameter.var->value));
          } else {
            cuda::copy(part(parameter.var->value), buffer);
            if (parameter.var->value_bf16.defined()) cast({buffer, part(parameter.var->value_bf16)});
          }
        }
        parameter_begin += numel;
      }
    };
    const int64_t mine_from = std::max(chunk_begin, begin_), mine_to = std::min(chunk_end, end_);
    if (mine_from < mine_to) visit(mine_from, mine_to, /*into_buffer=*/true);
    communicator_.all_gather(chunk, counts);
    visit(chunk_begin, std::min(chunk_end, std::max(chunk_begin, begin_)), /*into_buffer=*/false);
    visit(std::max(chunk_begin, std::min(chunk_end, end_)), chunk_end, /*into_buffer=*/false);
  }
}

void ShardedAdamW::load(const LoadedCheckpoint& checkpoint) {
  const OptimizerMoments moments = read_optimizer_moments(checkpoint, parameters_, begin_, end_);
  for (auto [target, source] : {std::pair<Tensor*, const std::vector<float>*>{&exp_avg_, &moments.exp_avg},
                                std::pair<Tensor*, const std::vector<float>*>{&exp_avg_sq_, &moments.exp_avg_sq}}) {
    Tensor host = Tensor::empty({end_ - begin_}, DType::f32);
    std::memcpy(host.ptr<float>(), source->data(), source->size() * 4);
    cuda::copy(*target, host.view());
  }
}

std::vector<StagedCheckpointFile> ShardedAdamW::write_shards(const std::string& staging_dir, int64_t step) const {
  const int world = communicator_.world_size(), rank = communicator_.rank();
  std::error_code error;
  fs::create_directories(staging_dir, error);
  LATHE_CHECK(fs::is_directory(staging_dir), "cannot create checkpoint staging directory ", staging_dir, ": ",
              error.message());
  const std::string name = shard_file_name(rank, world);
  const std::map<std::string, std::string> metadata = {{"format", "lathe-optimizer-shard"},
                                                       {"step", std::to_string(step)},
                                                       {"begin", std::to_string(begin_)},
                                                       {"end", std::to_string(end_)}};
  const Tensor exp_avg = on_host(exp_avg_), exp_avg_sq = on_host(exp_avg_sq_);
  const FileDigest digest = write_safetensors(
      staging_dir + "/" + name, {{"exp_avg", exp_avg.view()}, {"exp_avg_sq", exp_avg_sq.view()}}, metadata);
  // Every rank's digest reaches rank 0 (sizes and CRCs are exact in a double).
  std::vector<double> digests(2 * static_cast<size_t>(world), 0.0);
  digests[2 * rank] = static_cast<double>(digest.bytes);
  digests[2 * rank + 1] = static_cast<double>(digest.crc32c);
  communicator_.all_reduce_sum(digests.data(), static_cast<int64_t>(digests.size()));
  if (rank != 0) return {};

  std::vector<StagedCheckpointFile> staged;
  Json shards = Json::array();
  for (int r = 0; r < world; ++r) {
    const std::string file = shard_file_name(r, world);
    staged.push_back({staging_dir + "/" + file, file,
                      FileDigest{static_cast<int64_t>(digests[2 * r]), static_cast<uint32_t>(digests[2 * r + 1])}});
    Json shard = Json::object();
    shard.set("file", file);
    shard.set("begin", shard_begin(total_, r, world));
    shard.set("end", shard_begin(total_, r + 1, world));
    shards.push(std::move(shard));
  }
  Json listed = Json::array();
  for (const Parameter& parameter : parameters_) {
    Json entry = Json::array();
    entry.push(parameter.name);
    entry.push(parameter.var->value.numel());
    listed.push(std::move(entry));
  }
  Json index = Json::object();
  index.set("format", kIndexFormat);
  index.set("world_size", static_cast<int64_t>(world));
  index.set("elements", total_);
  index.set("parameters", std::move(listed));
  index.set("shards", std::move(shards));
  const std::string index_path = staging_dir + "/" + kIndexFile;
  staged.push_back({index_path, kIndexFile, write_file_synced(index_path, index.dump(2) + "\n")});
  return staged;
}

}  // namespace lathe
