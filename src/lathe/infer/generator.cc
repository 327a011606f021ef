#include "lathe/infer/generator.h"

#include <algorithm>

#include "lathe/core/error.h"
#include "lathe/device/device_tensor.h"

namespace lathe {

Generator::Generator(const TransformerModel& model, const SamplingParams& params)
    : model_(model),
      sampler_(params),
      capacity_(model.config().max_seq_len),
      cache_(model.make_kv_cache(model.config().max_seq_len)) {}

Tensor Generator::feed(const std::vector<int32_t>& ids) {
  Tensor input = Tensor::empty({1, static_cast<int64_t>(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), input.ptr<int32_t>());
  Tensor logits = model_.next_token_logits(on_device(model_.device(), input), cache_);
  cached_.insert(cached_.end(), ids.begin(), ids.end());
  return logits;
}

GenerationResult Generator::generate(const std::vector<int32_t>& context, const GenerationLimits& limits,
                                     const std::function<void(int32_t)>& on_token) {
  LATHE_CHECK(!context.empty(), "generation needs at least one token of context");
  LATHE_CHECK(static_cast<int64_t>(context.size()) < capacity_, "the prompt is ", context.size(),
              " tokens; the model's context is ", capacity_);
  // Keep the cached prefix the new context shares; at least the last token is fed again, since its
  // logits are what the first draw needs.
  size_t shared = 0;
  while (shared < cached_.size() && shared + 1 < context.size() && cached_[shared] == context[shared]) ++shared;
  if (cache_.rewindable()) {
    cache_.length = static_cast<int64_t>(shared);  // later appends overwrite the rows past it
  } else if (shared < cached_.size()) {
    // A recurrent state has absorbed every cached token: it cannot go back, so start again.
    cache_.clear();
    shared = 0;
  }
  cached_.resize(shared);

  const int64_t vocab = limits.sampled_vocab > 0 ? limits.sampled_vocab : model_.config().vocab_size;
  GenerationResult result;
  const std::vector<int32_t> rest(context.begin() + static_cast<std::ptrdiff_t>(shared), context.end());
  Tensor logits = feed(rest);
  for (int64_t produced = 0; produced < limits.max_tokens; ++produced) {
    const int32_t token = sampler_.sample(logits.ptr<float>(), vocab, draws_++);
    if (std::find(limits.stop_ids.begin(), limits.stop_ids.end(), token) != limits.stop_ids.end()) {
      result.stopped_by = token;
      break;
    }
    result.generated.push_back(token);
    on_token(token);
    if (produced + 1 == limits.max_tokens) break;  // the last token is fed by the next call, if any
    if (cache_.length >= capacity_) {
      result.context_full = true;
      break;
    }
    logits = feed({token});
  }
  return result;
}

}  // namespace lathe
