#include "lathe/text/streaming_decoder.h"

#include <algorithm>
#include <string_view>

#include "lathe/io/utf8.h"

namespace lathe {
namespace {

// Ids kept as context once everything is shown: enough for a decoder's look at its neighbours
// (a leading space stripped from the first token, byte tokens grouped into a character).
constexpr size_t kContextTokens = 4;
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// How much of `text` cannot change when more tokens follow.
size_t settled_length(std::string_view text) {
  size_t length = complete_utf8_prefix(text);
  while (length >= kReplacementCharacter.size() &&
         text.substr(length - kReplacementCharacter.size(), kReplacementCharacter.size()) == kReplacementCharacter)
    length -= kReplacementCharacter.size();
  return length;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, const std::vector<int32_t>& context)
    : tokenizer_(&tokenizer),
      window_(context.end() - static_cast<std::ptrdiff_t>(std::min(context.size(), kContextTokens)), context.end()),
      shown_(tokenizer.decode(window_)) {}

void StreamingDecoder::settle() {
  if (window_.size() > kContextTokens) {
    window_.erase(window_.begin(), window_.end() - static_cast<std::ptrdiff_t>(kContextTokens));
    shown_ = tokenizer_->decode(window_);
  }
}

std::string StreamingDecoder::push(int32_t id) {
  window_.push_back(id);
  const std::string text = tokenizer_->decode(window_);
  // A decoder that rewrites earlier text (a byte group that turned out invalid) cannot take back
  // what was shown: wait, and let finish() show the rest.
  if (text.compare(0, shown_.size(), shown_) != 0) return "";
  const size_t ready = settled_length(text);
  if (ready <= shown_.size()) return "";
  std::string out = text.substr(shown_.size(), ready - shown_.size());
  shown_.assign(text, 0, ready);
  if (ready == text.size()) settle();
  return out;
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_->decode(window_);
  size_t common = 0;
  while (common < std::min(text.size(), shown_.size()) && text[common] == shown_[common]) ++common;
  // Normally common == shown_.size(); after a rewrite (see push) the differing end is shown again.
  std::string out = text.substr(common);
  shown_ = text;
  settle();
  return out;
}

}  // namespace lathe
