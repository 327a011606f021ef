// The safetensors file format (Hugging Face): 8-byte little-endian header length N, N bytes of a
// JSON header, then the data buffer:
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string value>"}}
// Offsets are byte positions relative to the start of the data buffer; tensors are row-major.
// dtypes: F64 F32 BF16 F16 I64 I32 I16 I8 U16 U8 BOOL (lathe's; files with others, e.g. U32 or
// F8_E4M3, are rejected on open with an error naming the file, the tensor and the dtype).
//
// Writing: write_safetensors keeps the caller's order in the header, lays tensors out in the
// buffer by decreasing element size (so every tensor is aligned to its element size, as the
// 8-byte-aligned header puts the buffer at an 8-byte boundary), and replaces the target file
// atomically: a temporary file is written, fsynced and renamed over it, then the directory is
// fsynced. A crash leaves either the old file or the new one.
//
// Reading: SafetensorsFile::open maps the file read-only and validates the whole header before
// anything else (valid JSON; header length within the file; known dtype, rank <= 6 and
// non-negative shape for every tensor; end - begin == numel * element size; offsets inside the
// buffer; no overlaps; no gaps: the tensors tile the buffer exactly, as the reference
// implementation requires). Any violation throws lathe::Error naming the file and the tensor.
// Nothing is ever read outside the mapping. (The one thing validation cannot prevent: another
// process truncating the file while it is mapped, which the OS reports as SIGBUS.)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/io/durable_file.h"

namespace lathe {

using NamedTensorViews = std::vector<std::pair<std::string, TensorView>>;

// Writes `tensors` (any layout: non-contiguous views are copied row-major) and string metadata.
// Throws lathe::Error for an empty or duplicate name, a name "__metadata__", or an I/O failure
// (naming the path and the system's reason); a failed write leaves no temporary file behind.
FileDigest write_safetensors(const std::string& path, const NamedTensorViews& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// "F32" <-> DType::f32 etc.; parse throws lathe::Error listing the supported names.
const char* safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(const std::string& name, const std::string& context);

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  int64_t begin = 0;  // byte offsets within the data buffer
  int64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws lathe::Error naming the file (and tensor) on any problem.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const SafetensorsTensorInfo* find(const std::string& name) const;
  // The info, or lathe::Error naming the file and the missing tensor.
  const SafetensorsTensorInfo& info(const std::string& name) const;

  // A read-only view into the mapping (valid while this object lives). Throws lathe::Error when
  // the tensor is absent, or when its bytes are not aligned to its element size (possible in
  // files from other writers; read_as copies those safely).
  TensorView view(const std::string& name) const;
  // An owned contiguous copy converted to `dtype`. Floating types (f64, f32, bf16, f16) convert
  // among each other with round-to-nearest-even; integer and bool tensors to any dtype that holds
  // each value exactly (else lathe::Error naming the element); floating never to integer.
  Tensor read_as(const std::string& name, DType dtype) const;
  // The same conversion straight from the mapping into `destination` (contiguous, the tensor's
  // shape, any dtype), so loading a model needs no second copy of the file. A shape mismatch is a
  // lathe::Error naming the file and the tensor.
  void read_into(const std::string& name, const TensorView& destination) const;
  // An owned copy in the file's own dtype.
  Tensor read(const std::string& name) const;

  // The whole mapped file (header included), e.g. to checksum it without reading it again.
  const void* mapped_data() const { return mapping_; }
  int64_t mapped_bytes() const { return file_bytes_; }

 private:
  SafetensorsFile() = default;
  const unsigned char* tensor_bytes(const SafetensorsTensorInfo& info) const { return buffer_ + info.begin; }

  std::string path_;
  void* mapping_ = nullptr;
  int64_t file_bytes_ = 0;
  const unsigned char* buffer_ = nullptr;       // start of the data buffer inside the mapping
  std::vector<SafetensorsTensorInfo> tensors_;  // header order
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lathe
