#include "lathe/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "lathe/core/json.h"
#include "lathe/io/tensor_bytes.h"

namespace lathe {

namespace {

constexpr const char* kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB; a larger length field is corrupt.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Offsets and extents beyond 2^53 cannot be held exactly by a JSON number.
constexpr double kMaxExactInteger = 9007199254740992.0;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{DType::f64, "F64"}, {DType::f32, "F32"}, {DType::bf16, "BF16"},
                                     {DType::f16, "F16"}, {DType::i64, "I64"}, {DType::i32, "I32"},
                                     {DType::u16, "U16"}, {DType::u8, "U8"},   {DType::i16, "I16"},
                                     {DType::i8, "I8"},   {DType::boolean, "BOOL"}};

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& entry : kDTypeNames)
    if (entry.dtype == dtype) return entry.name;
  LATHE_ASSERT(false);
  return "";
}

DType parse_safetensors_dtype(const std::string& name, const std::string& context) {
  for (const auto& entry : kDTypeNames)
    if (name == entry.name) return entry.dtype;
  throw_error(context, ": dtype \"", name, "\" is not supported (expected F64, F32, BF16, F16, I64, I32, I16, I8, U16, U8 or BOOL)");
}

// ---------------------------------------------------------------------------------------------
// Writing

FileDigest write_safetensors(const std::string& path, const NamedTensorViews& tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const auto& [name, view] : tensors) {
    LATHE_CHECK(!name.empty(), path, ": tensor names must not be empty");
    LATHE_CHECK(name != kMetadataKey, path, ": \"", kMetadataKey, "\" is reserved and cannot name a tensor");
    LATHE_CHECK(seen.insert(name).second, path, ": tensor \"", name, "\" given twice");
    LATHE_CHECK(view.numel() == 0 || view.data != nullptr, path, ": tensor \"", name, "\" has no data");
  }

  // Larger elements first keeps every tensor aligned to its element size; stable, so tensors of
  // one dtype stay in the caller's order.
  std::vector<size_t> layout(tensors.size());
  std::iota(layout.begin(), layout.end(), size_t{0});
  std::stable_sort(layout.begin(), layout.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype) > dtype_size(tensors[b].second.dtype);
  });
  std::vector<int64_t> begins(tensors.size());
  int64_t offset = 0;
  for (size_t index : layout) {
    begins[index] = offset;
    offset += tensor_byte_size(tensors[index].second);
  }

  Json header = Json::object();
  if (!metadata.empty()) {
    Json& meta = header.set(kMetadataKey, Json::object());
    for (const auto& [key, value] : metadata) meta.set(key, value);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& view = tensors[i].second;
    Json shape = Json::array();
    for (int axis = 0; axis < view.rank(); ++axis) shape.push(view.shape[axis]);
    Json offsets = Json::array();
    offsets.push(begins[i]);
    offsets.push(begins[i] + tensor_byte_size(view));
    Json entry = Json::object();
    entry.set("dtype", safetensors_dtype_name(view.dtype));
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", std::move(offsets));
    header.set(tensors[i].first, std::move(entry));
  }
  std::string header_text = header.dump(0);
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(uint64_t{header_text.size()} >> (8 * i));

  std::string temporary = str_cat(path, ".tmp.", ::getpid());
  FileDigest digest;
  {
    DurableFileWriter writer(temporary);  // deletes the temporary file if anything below throws
    writer.write(length_bytes, sizeof length_bytes);
    writer.write(header_text.data(), header_text.size());
    for (size_t index : layout) {
      const TensorView& view = tensors[index].second;
      if (view.numel() == 0) continue;
      if (view.is_contiguous()) {
        writer.write(view.data, static_cast<size_t>(tensor_byte_size(view)));
      } else {
        Tensor staging = Tensor::empty(view.shape, view.dtype);
        copy_to_contiguous(view, staging.view().data);
        writer.write(staging.view().data, static_cast<size_t>(tensor_byte_size(view)));
      }
    }
    digest = writer.finish();
  }
  commit_temporary_file(temporary, path);
  return digest;
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

// A non-negative integer from the header that fits exactly in a double (so in int64_t too).
int64_t header_integer(const Json& value, const std::string& context) {
  LATHE_CHECK(value.is_number(), context, " must be a non-negative integer");
  double number = value.as_number();
  LATHE_CHECK(std::isfinite(number) && number >= 0 && number <= kMaxExactInteger && std::floor(number) == number,
              context, " must be a non-negative integer, found ", number);
  return static_cast<int64_t>(number);
}

SafetensorsTensorInfo parse_tensor_entry(const std::string& name, const Json& entry, const std::string& path) {
  std::string context = str_cat(path, ": tensor \"", name, "\"");
  LATHE_CHECK(entry.is_object(), context, ": header entry must be an object");
  SafetensorsTensorInfo info;
  info.name = name;

  const Json* dtype = entry.find("dtype");
  LATHE_CHECK(dtype && dtype->is_string(), context, ": missing string \"dtype\"");
  info.dtype = parse_safetensors_dtype(dtype->as_string(), context);

  const Json* shape = entry.find("shape");
  LATHE_CHECK(shape && shape->is_array(), context, ": missing array \"shape\"");
  LATHE_CHECK(shape->size() <= static_cast<size_t>(kMaxRank), context, ": rank ", shape->size(),
              " exceeds the maximum of ", kMaxRank);
  int64_t numel = 1;
  bool overflow = false;
  for (const Json& extent : shape->items()) {
    int64_t dim = header_integer(extent, context + ": shape extent");
    info.shape.push_back(dim);
    overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
  }
  int64_t bytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, int64_t{dtype_size(info.dtype)}, &bytes);
  LATHE_CHECK(!overflow, context, ": shape ", info.shape.to_string(), " is too large");

  const Json* offsets = entry.find("data_offsets");
  LATHE_CHECK(offsets && offsets->is_array() && offsets->size() == 2, context,
              ": missing \"data_offsets\" [begin, end]");
  info.begin = header_integer(offsets->items()[0], context + ": data_offsets begin");
  info.end = header_integer(offsets->items()[1], context + ": data_offsets end");
  LATHE_CHECK(info.begin <= info.end, context, ": data_offsets [", info.begin, ", ", info.end, ") run backwards");
  LATHE_CHECK(info.end - info.begin == bytes, context, ": data_offsets [", info.begin, ", ", info.end, ") hold ",
              info.end - info.begin, " bytes, but ", dtype_name(info.dtype), info.shape.to_string(), " needs ", bytes);
  return info;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;  // unmaps on any throw below
  file.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LATHE_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat status;
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    throw_error(path, ": not a regular file");
  }
  file.file_bytes_ = status.st_size;
  if (file.file_bytes_ < 8) {
    ::close(fd);
    throw_error(path, ": ", file.file_bytes_, " bytes is too short for a safetensors file (8-byte header length)");
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file.file_bytes_), PROT_READ, MAP_PRIVATE, fd, 0);
  int map_error = errno;
  ::close(fd);
  LATHE_CHECK(mapping != MAP_FAILED, "cannot map ", path, ": ", std::strerror(map_error));
  file.mapping_ = mapping;
  const auto* bytes = static_cast<const unsigned char*>(mapping);

  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{bytes[i]} << (8 * i);
  uint64_t available = static_cast<uint64_t>(file.file_bytes_) - 8;
  LATHE_CHECK(header_length <= available, path, ": header length ", header_length, " exceeds the ", available,
              " bytes after the length field (truncated or not a safetensors file)");
  LATHE_CHECK(header_length <= kMaxHeaderBytes, path, ": header length ", header_length, " exceeds the limit of ",
              kMaxHeaderBytes, " bytes");
  file.buffer_ = bytes + 8 + header_length;
  int64_t buffer_bytes = static_cast<int64_t>(available - header_length);

  Json header;
  try {
    header = Json::parse(std::string(reinterpret_cast<const char*>(bytes + 8), header_length));
  } catch (const Error& error) {
    throw error.with_context(str_cat(path, ": header"));
  }
  LATHE_CHECK(header.is_object(), path, ": header must be a JSON object");

  for (const auto& [name, entry] : header.members()) {
    if (name == kMetadataKey) {
      LATHE_CHECK(entry.is_object(), path, ": \"", kMetadataKey, "\" must be an object of strings");
      for (const auto& [key, value] : entry.members()) {
        LATHE_CHECK(value.is_string(), path, ": metadata \"", key, "\" must be a string");
        file.metadata_[key] = value.as_string();
      }
      continue;
    }
    SafetensorsTensorInfo info = parse_tensor_entry(name, entry, path);
    LATHE_CHECK(info.end <= buffer_bytes, path, ": tensor \"", name, "\": data_offsets [", info.begin, ", ", info.end,
                ") exceed the data buffer of ", buffer_bytes, " bytes (truncated file?)");
    // The JSON parser already rejects duplicate keys; this guards the index against any change there.
    LATHE_CHECK(file.index_.emplace(name, file.tensors_.size()).second, path, ": tensor \"", name, "\" appears twice");
    file.tensors_.push_back(std::move(info));
  }

  // The tensors must tile the buffer: sorted by offset, each starts where the previous ended.
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& info : file.tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  int64_t covered = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const auto* info : by_offset) {
    LATHE_CHECK(info->begin >= covered, path, ": tensor \"", info->name, "\" bytes [", info->begin, ", ", info->end,
                ") overlap tensor \"", previous ? previous->name : "", "\"");
    LATHE_CHECK(info->begin == covered, path, ": bytes [", covered, ", ", info->begin, ") before tensor \"", info->name,
                "\" belong to no tensor");
    covered = info->end;
    previous = info;
  }
  LATHE_CHECK(covered == buffer_bytes, path, ": bytes [", covered, ", ", buffer_bytes,
              ") at the end of the data buffer belong to no tensor");
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this == &other) return *this;
  if (mapping_) ::munmap(mapping_, static_cast<size_t>(file_bytes_));
  path_ = std::move(other.path_);
  mapping_ = std::exchange(other.mapping_, nullptr);
  file_bytes_ = std::exchange(other.file_bytes_, 0);
  buffer_ = std::exchange(other.buffer_, nullptr);
  tensors_ = std::move(other.tensors_);
  index_ = std::move(other.index_);
  metadata_ = std::move(other.metadata_);
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, static_cast<size_t>(file_bytes_));
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& info : tensors_) names.push_back(info.name);
  return names;
}

const SafetensorsTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto found = index_.find(name);
  return found == index_.end() ? nullptr : &tensors_[found->second];
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const SafetensorsTensorInfo* found = find(name);
  LATHE_CHECK(found, path_, ": no tensor \"", name, "\"");
  return *found;
}

TensorView SafetensorsFile::view(const std::string& name) const {
  const SafetensorsTensorInfo& tensor = info(name);
  const unsigned char* data = tensor_bytes(tensor);
  LATHE_CHECK(reinterpret_cast<uintptr_t>(data) % dtype_size(tensor.dtype) == 0, path_, ": tensor \"", name,
              "\" is not aligned to its ", dtype_size(tensor.dtype), "-byte elements; use read_as to copy it");
  TensorView view;
  view.data = const_cast<unsigned char*>(data);  // the mapping is PROT_READ: a write would fault
  view.shape = tensor.shape;
  view.strides = contiguous_strides(tensor.shape);
  view.dtype = tensor.dtype;
  return view;
}

namespace {

// Loads floating element i of any floating dtype (unaligned-safe).
double load_floating(const unsigned char* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f64: {
      double v;
      std::memcpy(&v, data + 8 * i, 8);
      return v;
    }
    case DType::f32: {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      return v;
    }
    case DType::bf16: {
      bf16 v;
      std::memcpy(&v, data + 2 * i, 2);
      return bf16_to_float(v);
    }
    case DType::f16: {
      f16 v;
      std::memcpy(&v, data + 2 * i, 2);
      return f16_to_float(v);
    }
    default:
      LATHE_ASSERT(false);
  }
  return 0;
}

// A float that rounds to the same 16-bit value as `value` would directly: double -> float with
// round-to-odd (truncate, then set the last bit if anything was dropped) keeps the information a
// later round-to-nearest-even to bf16/f16 needs, avoiding double rounding.
float to_float_round_to_odd(double value) {
  float rounded = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(rounded) == value) return rounded;
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(value)) rounded = std::nextafter(rounded, 0.0f);
  uint32_t bits = float_bits(rounded) | 1u;
  return float_from_bits(bits);
}

int64_t load_integer(const unsigned char* data, DType dtype, int64_t i) {
  auto load = [&](auto sample) {
    decltype(sample) v;
    std::memcpy(&v, data + sizeof v * i, sizeof v);
    return static_cast<int64_t>(v);
  };
  switch (dtype) {
    case DType::i64: return load(int64_t{});
    case DType::i32: return load(int32_t{});
    case DType::i16: return load(int16_t{});
    case DType::i8: return load(int8_t{});
    case DType::u16: return load(uint16_t{});
    case DType::u8: return load(uint8_t{});
    case DType::boolean: return load(uint8_t{}) != 0 ? 1 : 0;
    default: LATHE_ASSERT(false);
  }
  return 0;
}

// Whether `dtype` represents `value` exactly (floating types: within their integer range).
bool integer_fits(int64_t value, DType dtype) {
  switch (dtype) {
    case DType::f64: return value >= -(int64_t{1} << 53) && value <= (int64_t{1} << 53);
    case DType::f32: return value >= -(int64_t{1} << 24) && value <= (int64_t{1} << 24);
    case DType::bf16: return value >= -256 && value <= 256;
    case DType::f16: return value >= -2048 && value <= 2048;
    case DType::i64: return true;
    case DType::i32: return value >= INT32_MIN && value <= INT32_MAX;
    case DType::i16: return value >= INT16_MIN && value <= INT16_MAX;
    case DType::i8: return value >= INT8_MIN && value <= INT8_MAX;
    case DType::u16: return value >= 0 && value <= UINT16_MAX;
    case DType::u8: return value >= 0 && value <= UINT8_MAX;
    case DType::boolean: return value == 0 || value == 1;
  }
  return false;
}

void store_floating(const TensorView& out, int64_t i, double value, bool from_f64) {
  switch (out.dtype) {
    case DType::f64:
      static_cast<double*>(out.data)[i] = value;
      break;
    case DType::f32:
      static_cast<float*>(out.data)[i] = static_cast<float>(value);
      break;
    case DType::bf16:
      static_cast<bf16*>(out.data)[i] = float_to_bf16(from_f64 ? to_float_round_to_odd(value) : static_cast<float>(value));
      break;
    case DType::f16:
      static_cast<f16*>(out.data)[i] = float_to_f16(from_f64 ? to_float_round_to_odd(value) : static_cast<float>(value));
      break;
    default:
      LATHE_ASSERT(false);
  }
}

}  // namespace

Tensor SafetensorsFile::read_as(const std::string& name, DType dtype) const {
  Tensor out = Tensor::empty(info(name).shape, dtype);
  read_into(name, out);
  return out;
}

void SafetensorsFile::read_into(const std::string& name, const TensorView& destination) const {
  const SafetensorsTensorInfo& tensor = info(name);
  LATHE_CHECK(destination.shape == tensor.shape, path_, ": tensor \"", name, "\" has shape ", tensor.shape.to_string(),
              ", expected ", destination.shape.to_string());
  LATHE_ASSERT(destination.is_contiguous());
  const unsigned char* data = tensor_bytes(tensor);
  const int64_t count = tensor.shape.numel();
  const DType dtype = destination.dtype;
  if (dtype == tensor.dtype) {
    if (count > 0) std::memcpy(destination.data, data, static_cast<size_t>(tensor.end - tensor.begin));
    return;
  }
  if (is_floating(tensor.dtype)) {
    LATHE_CHECK(is_floating(dtype), path_, ": tensor \"", name, "\" is ", dtype_name(tensor.dtype),
                " and cannot be converted to ", dtype_name(dtype), " (floating types convert only to floating types)");
    const bool from_f64 = tensor.dtype == DType::f64;
    for (int64_t i = 0; i < count; ++i)
      store_floating(destination, i, load_floating(data, tensor.dtype, i), from_f64);
    return;
  }
  // Integers (and booleans) convert to any dtype that holds every value exactly.
  for (int64_t i = 0; i < count; ++i) {
    const int64_t value = load_integer(data, tensor.dtype, i);
    LATHE_CHECK(integer_fits(value, dtype), path_, ": tensor \"", name, "\" element ", i, " (", value,
                ") does not fit in ", dtype_name(dtype));
    write_element(destination, i, static_cast<double>(value));
  }
}

Tensor SafetensorsFile::read(const std::string& name) const { return read_as(name, info(name).dtype); }

}  // namespace lathe
