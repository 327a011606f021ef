// Token-by-token generation over a KV cache, shared by `lathe generate`'s plain continuation and
// its chat turns.
//
// generate(context, limits, on_token) first brings the cache to hold `context`: the longest prefix
// the cache already holds is kept (a chat turn only feeds what the conversation added), the rest is
// fed in one forward pass. A cache with recurrent state keeps its tokens only when the context
// extends all of them, and is refilled from the start otherwise. Then it samples up to limits.max_tokens tokens, feeding each back. A
// token in limits.stop_ids ends generation: it is returned in `stopped_by`, not passed to on_token
// and not fed. Generation also ends when the cache is full. Draws are numbered across calls, so a
// conversation is reproducible from its seed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "lathe/infer/sampling.h"
#include "lathe/models/kv_cache.h"
#include "lathe/models/transformer.h"

namespace lathe {

struct GenerationLimits {
  int64_t max_tokens = 200;
  std::vector<int32_t> stop_ids;  // e.g. the end-of-text token, the end of an assistant turn
  int64_t sampled_vocab = 0;      // ids >= this are never sampled (padding rows); 0: the model's vocab
};

struct GenerationResult {
  std::vector<int32_t> generated;     // sampled ids, without the stop token
  std::optional<int32_t> stopped_by;  // the stop id that ended generation
  bool context_full = false;          // ended at the model's context length
};

class Generator {
 public:
  Generator(const TransformerModel& model, const SamplingParams& params);

  // context: the whole sequence so far (prompt, conversation). Throws lathe::Error when it does
  // not fit in the model's context with room for one more token.
  GenerationResult generate(const std::vector<int32_t>& context, const GenerationLimits& limits,
                            const std::function<void(int32_t token)>& on_token);

  const KvCache& cache() const { return cache_; }
  int64_t capacity() const { return capacity_; }

 private:
  // Feeds ids after what the cache holds; returns the last position's logits, (vocab) f32.
  Tensor feed(const std::vector<int32_t>& ids);

  const TransformerModel& model_;
  Sampler sampler_;
  int64_t capacity_;
  KvCache cache_;
  std::vector<int32_t> cached_;  // the ids the cache holds, in order
  uint64_t draws_ = 0;
};

}  // namespace lathe
