#include "lathe/models/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "lathe/core/error.h"
#include "lathe/device/device_tensor.h"

namespace lathe {

KvCache::KvCache(int64_t layers, int64_t max_seq, int64_t kv_heads, int64_t head_dim) : max_tokens(max_seq) {
  for (int64_t layer = 0; layer < layers; ++layer) {
    keys.push_back(Tensor::zeros({1, max_seq, kv_heads, head_dim}, DType::f32));
    values.push_back(Tensor::zeros({1, max_seq, kv_heads, head_dim}, DType::f32));
  }
}

KvCache KvCache::latent(int64_t layers, int64_t max_seq, int64_t width) {
  KvCache cache;
  cache.max_tokens = max_seq;
  for (int64_t layer = 0; layer < layers; ++layer)
    cache.keys.push_back(Tensor::zeros({1, max_seq, 1, width}, DType::f32));
  return cache;
}

KvCache KvCache::per_layer(const std::vector<std::pair<int64_t, int64_t>>& heads_and_dims, int64_t max_seq) {
  KvCache cache;
  cache.max_tokens = max_seq;
  for (const auto& [heads, head_dim] : heads_and_dims) {
    const Shape shape{1, heads > 0 ? max_seq : 0, heads, head_dim};
    cache.keys.push_back(Tensor::zeros(shape, DType::f32));
    cache.values.push_back(Tensor::zeros(shape, DType::f32));
  }
  return cache;
}

KvCache KvCache::empty(int64_t layers, int64_t max_seq) {
  KvCache cache;
  cache.max_tokens = max_seq;
  cache.keys.resize(static_cast<size_t>(layers), Tensor::zeros({1, 0, 0, 0}, DType::f32));
  cache.values = cache.keys;
  return cache;
}

int64_t KvCache::recurrent_state_bytes() const {
  int64_t bytes = 0;
  for (const std::vector<Tensor>* tensors : {&conv_states, &recurrent_states})
    for (const Tensor& tensor : *tensors)
      if (tensor.defined()) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  return bytes;
}

void KvCache::clear() {
  length = 0;
  for (std::vector<Tensor>* tensors : {&conv_states, &recurrent_states})
    for (Tensor& tensor : *tensors) {
      if (!tensor.defined()) continue;
      if (tensor.view().device == Device::cuda)
        cuda::fill_bytes(tensor.view(), 0);
      else
        std::memset(tensor.view().data, 0, static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype()));
    }
}

void KvCache::move_to(Device device) {
  LATHE_CHECK(length == 0, "KV cache: moved while it holds ", length, " tokens");
  for (std::vector<Tensor>* tensors : {&keys, &values, &conv_states, &recurrent_states})
    for (Tensor& tensor : *tensors)
      if (tensor.defined() && tensor.view().device != device)
        tensor = device == Device::cuda ? cuda::to_device(tensor.view()) : cuda::to_host(tensor.view());
}

int64_t KvCache::bytes_per_token() const {
  int64_t bytes = 0;
  for (const std::vector<Tensor>* tensors : {&keys, &values})
    for (const Tensor& tensor : *tensors)
      if (tensor.dim(1) > 0) bytes += tensor.numel() / tensor.dim(1) * static_cast<int64_t>(dtype_size(tensor.dtype()));
  return bytes;
}

Tensor append_tokens(Tensor& buffer, int64_t offset, const Tensor& rows) {
  const int64_t seq = rows.dim(1), end = offset + seq, capacity = buffer.dim(1);
  LATHE_CHECK(end <= capacity, "generation: ", end, " tokens exceed the KV cache capacity of ", capacity,
              " (model.max_seq_len)");
  LATHE_ASSERT(rows.view().device == buffer.view().device && rows.dtype() == buffer.dtype());
  if (seq > 0) cuda::copy(buffer.view().slice(1, offset, end), rows.view());  // a plain copy on the host
  return buffer.share_view(buffer.view().slice(1, 0, end));
}

void store_state(const Tensor& final_state, Tensor& cached) {
  LATHE_ASSERT(final_state.numel() == cached.numel() && final_state.dtype() == cached.dtype());
  LATHE_ASSERT(final_state.view().device == cached.view().device);
  cuda::copy(cached.view(), final_state.view().reshape(cached.shape()));
}

}  // namespace lathe
