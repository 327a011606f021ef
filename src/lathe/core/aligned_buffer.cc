#include "lathe/core/aligned_buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace lathe {

AlignedBuffer::AlignedBuffer(size_t bytes, bool zeroed) : bytes_(bytes) {
  data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!data_) throw std::bad_alloc();
  if (zeroed) std::memset(data_, 0, bytes);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

}  // namespace lathe
