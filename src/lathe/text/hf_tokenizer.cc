// HfTokenizer's encode and decode pipelines; the loader is hf_tokenizer_json.cc.
#include "lathe/text/hf_tokenizer.h"

#include <algorithm>
#include <queue>

#include "lathe/core/error.h"
#include "lathe/io/utf8.h"
#include "lathe/text/hf_tokenizer_parts.h"
#include "lathe/text/pretokenize.h"
#include "lathe/text/unicode_text.h"

namespace lathe {
namespace {

// Past this many distinct words the cache stops growing; long words (a whole SentencePiece text
// without a pre-tokenizer) are not worth keeping.
constexpr size_t kMaxCachedWords = 1 << 20;
constexpr size_t kMaxCachedWordBytes = 256;

// A stretch of text on its way through the pipeline, or an added token already recognised.
struct Segment {
  std::string text;
  int32_t added_id = -1;
  bool at_start = false;  // begins at offset 0 of the input (Metaspace prepend_scheme "first")
};

size_t utf8_length_at(std::string_view text, size_t i) {
  unsigned char lead = static_cast<unsigned char>(text[i]);
  return lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}

uint32_t code_point_at(std::string_view text, size_t i) {
  std::vector<uint32_t> code_points;
  std::vector<size_t> offsets;
  decode_utf8(text.substr(i, utf8_length_at(text, i)), code_points, offsets);
  return code_points[0];
}

// Start of the code point that ends just before byte `end`.
size_t start_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
  return start;
}
uint32_t code_point_before(std::string_view text, size_t end) { return code_point_at(text, start_before(text, end)); }

// Regex \w as the `regex` crate defines it (Alphabetic, marks, decimal digits, connector
// punctuation, joiners): single_word added tokens need a non-word character on both sides.
bool is_word_character(uint32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189))
    return true;  // circled and squared letters: symbols that are Other_Alphabetic
  UnicodeCategory category = unicode_category(c);
  return category.major == 'L' || category.major == 'M' ||
         (category.major == 'N' && (category.minor == 'd' || category.minor == 'l')) ||
         (category.major == 'P' && category.minor == 'c');
}

// Cuts added tokens (those of one `normalized` kind, indexed by first byte) out of text: leftmost
// match first, the longest at equal starts; lstrip / rstrip swallow the whitespace beside a match;
// single_word tokens only match between non-word characters. With skip_special, a match of a
// special token is passed over (its text stays ordinary text), as `tokenizers` does with
// encode_special_tokens.
void split_added_tokens(const std::array<std::vector<const HfAddedToken*>, 256>& index, const Segment& input,
                        bool skip_special, std::vector<Segment>& out) {
  std::string_view text = input.text;
  size_t piece_start = 0, i = 0;
  auto emit_text = [&](size_t begin, size_t end) {
    if (end > begin) out.push_back({std::string(text.substr(begin, end - begin)), -1, input.at_start && begin == 0});
  };
  while (i < text.size()) {
    const HfAddedToken* found = nullptr;
    for (const HfAddedToken* token : index[static_cast<unsigned char>(text[i])]) {
      if (text.compare(i, token->content.size(), token->content) == 0) {
        found = token;
        break;
      }
    }
    if (!found) {
      i += utf8_length_at(text, i);
      continue;
    }
    size_t end = i + found->content.size();
    // A rejected single_word match is consumed all the same (tokenizers filters its automaton's
    // non-overlapping matches afterwards), so nothing else matches inside it.
    if ((skip_special && found->special) ||
        (found->single_word && ((i > 0 && is_word_character(code_point_before(text, i))) ||
                                (end < text.size() && is_word_character(code_point_at(text, end)))))) {
      i = end;
      continue;
    }
    size_t match_start = i, match_end = i + found->content.size();
    if (found->lstrip)
      while (match_start > piece_start && is_unicode_white_space(code_point_before(text, match_start)))
        match_start = start_before(text, match_start);
    if (found->rstrip)
      while (match_end < text.size() && is_unicode_white_space(code_point_at(text, match_end)))
        match_end += utf8_length_at(text, match_end);
    emit_text(piece_start, match_start);
    out.push_back({"", found->id, false});
    piece_start = i = match_end;
  }
  emit_text(piece_start, text.size());
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  while (true) {
    size_t found = text.find(from, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start));
    out.append(to);
    start = found + from.size();
  }
  out.append(text.substr(start));
  return out;
}

// Splits one piece at the matches (byte ranges) as a Split pre-tokenizer with `behavior` does.
void split_piece(const Segment& piece, const std::vector<std::pair<size_t, size_t>>& matches, HfSplitBehavior behavior,
                 bool invert, std::vector<Segment>& out) {
  struct Span {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Span> spans;
  size_t previous = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > previous) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  }
  if (previous < piece.text.size()) spans.push_back({previous, piece.text.size(), invert});
  std::vector<Span> kept;
  bool previous_match = false;
  switch (behavior) {
    case HfSplitBehavior::isolated:
      kept.swap(spans);
      break;
    case HfSplitBehavior::removed:
      for (const Span& span : spans)
        if (!span.is_match) kept.push_back(span);
      break;
    case HfSplitBehavior::merged_with_previous:
      for (const Span& span : spans) {
        if (span.is_match && !previous_match && !kept.empty())
          kept.back().end = span.end;
        else
          kept.push_back(span);
        previous_match = span.is_match;
      }
      break;
    case HfSplitBehavior::merged_with_next:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& span = spans[k];
        if (span.is_match && !previous_match && !kept.empty())
          kept.back().begin = span.begin;
        else
          kept.push_back(span);
        previous_match = span.is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case HfSplitBehavior::contiguous:
      for (const Span& span : spans) {
        if (span.is_match && previous_match && !kept.empty())
          kept.back().end = span.end;
        else
          kept.push_back(span);
        previous_match = span.is_match;
      }
      break;
  }
  for (const Span& span : kept)
    if (span.end > span.begin)
      out.push_back({piece.text.substr(span.begin, span.end - span.begin), -1, piece.at_start && span.begin == 0});
}

std::vector<std::pair<size_t, size_t>> regex_matches(const SplitRegex& regex, const std::string& text) {
  std::vector<uint32_t> code_points;
  std::vector<size_t> offsets;
  decode_utf8(text, code_points, offsets);
  auto matches = regex.find_all(code_points);
  for (auto& [begin, end] : matches) {
    begin = offsets[begin];
    end = offsets[end];
  }
  return matches;
}

std::vector<std::pair<size_t, size_t>> literal_matches(const std::string& literal, const std::string& text) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t found = text.find(literal); found != std::string::npos;
       found = text.find(literal, found + literal.size()))
    matches.emplace_back(found, found + literal.size());
  return matches;
}

void apply_pre_tokenizer_step(const HfPreTokenizerStep& step, std::vector<Segment>& pieces) {
  std::vector<Segment> out;
  for (Segment& piece : pieces) {
    switch (step.kind) {
      case HfPreTokenizerStep::Kind::split:
        split_piece(piece,
                    step.regex ? regex_matches(*step.regex, piece.text) : literal_matches(step.literal, piece.text),
                    step.behavior, step.invert, out);
        break;
      case HfPreTokenizerStep::Kind::byte_level: {
        if (step.add_prefix_space && piece.text[0] != ' ') piece.text = ' ' + piece.text;
        std::vector<Segment> words;
        if (step.use_regex)
          split_piece(piece, regex_matches(*step.regex, piece.text), HfSplitBehavior::isolated, false, words);
        else
          words.push_back(piece);
        for (Segment& word : words) {
          word.text = bytes_to_byte_level(word.text);
          out.push_back(std::move(word));
        }
        break;
      }
      case HfPreTokenizerStep::Kind::metaspace: {
        piece.text = replace_all(piece.text, " ", step.replacement);
        bool prepend = step.prepend_scheme == HfPreTokenizerStep::PrependScheme::always ||
                       (step.prepend_scheme == HfPreTokenizerStep::PrependScheme::first && piece.at_start);
        if (prepend && piece.text.compare(0, step.replacement.size(), step.replacement) != 0)
          piece.text = step.replacement + piece.text;
        if (step.split)
          split_piece(piece, literal_matches(step.replacement, piece.text), HfSplitBehavior::merged_with_next, false,
                      out);
        else
          out.push_back(std::move(piece));
        break;
      }
    }
  }
  pieces = std::move(out);
}

// BPE on one word: each character becomes its token (or byte-fallback tokens, or unk), then merges
// apply lowest rank first, leftmost first among equal ranks, as tokenizers' merge queue does.
void encode_word(const HfBpeModel& model, const std::string& word, std::vector<int32_t>& ids) {
  if (model.ignore_merges) {
    auto found = model.vocab.find(word);
    if (found != model.vocab.end()) {
      ids.push_back(found->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  bool pending_unk = false;
  auto flush_unk = [&] {
    if (pending_unk) symbols.push_back(model.unk_id);
    pending_unk = false;
  };
  for (size_t i = 0; i < word.size();) {
    size_t length = utf8_length_at(word, i);
    std::string piece = word.substr(i, length);
    if (i > 0) piece = model.continuing_subword_prefix + piece;
    if (i + length == word.size()) piece += model.end_of_word_suffix;
    i += length;
    auto found = model.vocab.find(piece);
    if (found != model.vocab.end()) {
      flush_unk();
      symbols.push_back(found->second);
      continue;
    }
    if (model.byte_fallback) {
      std::vector<int32_t> bytes;
      static const char* const kHex = "0123456789ABCDEF";
      for (size_t k = i - length; k < i; ++k) {
        unsigned char byte = static_cast<unsigned char>(word[k]);
        char name[7] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>', 0};
        auto byte_token = model.vocab.find(std::string_view(name));
        if (byte_token == model.vocab.end()) break;
        bytes.push_back(byte_token->second);
      }
      if (bytes.size() == length) {
        flush_unk();
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (model.unk_id < 0) continue;  // tokenizers drops characters it cannot name
    if (!model.fuse_unk) flush_unk();
    pending_unk = true;
  }
  flush_unk();

  struct Candidate {
    int32_t rank, position, result;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  const size_t count = symbols.size();
  std::vector<int32_t> previous(count), next(count);
  for (size_t k = 0; k < count; ++k) {
    previous[k] = static_cast<int32_t>(k) - 1;
    next[k] = k + 1 < count ? static_cast<int32_t>(k + 1) : -1;
  }
  std::vector<bool> alive(count, true);
  auto lookup = [&](int32_t left, int32_t right) -> const HfBpeModel::Merge* {
    auto found =
        model.merges.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right));
    return found == model.merges.end() ? nullptr : &found->second;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t k = 0; k + 1 < count; ++k)
    if (const auto* merge = lookup(symbols[k], symbols[k + 1]))
      queue.push({merge->rank, static_cast<int32_t>(k), merge->result});
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    size_t position = static_cast<size_t>(top.position);
    if (!alive[position] || next[position] < 0) continue;
    size_t right = static_cast<size_t>(next[position]);
    const auto* merge = lookup(symbols[position], symbols[right]);
    if (!merge || merge->result != top.result) continue;  // stale: a neighbour changed since
    symbols[position] = top.result;
    alive[right] = false;
    next[position] = next[right];
    if (next[right] >= 0) previous[static_cast<size_t>(next[right])] = top.position;
    if (previous[position] >= 0) {
      if (const auto* left_merge = lookup(symbols[static_cast<size_t>(previous[position])], top.result))
        queue.push({left_merge->rank, previous[position], left_merge->result});
    }
    if (next[position] >= 0) {
      if (const auto* right_merge = lookup(top.result, symbols[static_cast<size_t>(next[position])]))
        queue.push({right_merge->rank, top.position, right_merge->result});
    }
  }
  for (size_t k = 0; k < count; ++k)
    if (alive[k]) ids.push_back(symbols[k]);
}

// Rust's String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD.
std::string to_lossy_utf8(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    size_t invalid = find_invalid_utf8(bytes.substr(i));
    if (invalid == std::string_view::npos) {
      out.append(bytes.substr(i));
      break;
    }
    out.append(bytes.substr(i, invalid));
    i += invalid;
    // The longest prefix of the bad sequence that could still have become valid.
    size_t keep = 1;
    for (size_t length = 2; length <= 3 && i + length <= bytes.size(); ++length) {
      std::string_view prefix = bytes.substr(i, length);
      if (complete_utf8_prefix(prefix) == 0 && (static_cast<unsigned char>(prefix.back()) & 0xc0) == 0x80)
        keep = length;
      else
        break;
    }
    out.append("\xEF\xBF\xBD");
    i += keep;
  }
  return out;
}

int parse_byte_token(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    char c = token[static_cast<size_t>(k)];
    int digit = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

void apply_decoder_step(const HfDecoderStep& step, std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  switch (step.kind) {
    case HfDecoderStep::Kind::byte_level: {
      std::string bytes, token_bytes;
      for (const std::string& token : tokens) {
        if (byte_level_to_bytes(token, token_bytes))
          bytes += token_bytes;
        else
          bytes += token;  // a token outside the byte-level alphabet (an added token) stands for itself
      }
      out.push_back(to_lossy_utf8(bytes));
      break;
    }
    case HfDecoderStep::Kind::replace:
      for (const std::string& token : tokens) out.push_back(replace_all(token, step.pattern, step.content));
      break;
    case HfDecoderStep::Kind::byte_fallback: {
      std::string pending;
      size_t pending_count = 0;
      auto flush = [&] {
        if (pending_count == 0) return;
        if (find_invalid_utf8(pending) == std::string::npos) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending_count; ++k) out.push_back("\xEF\xBF\xBD");
        }
        pending.clear();
        pending_count = 0;
      };
      for (const std::string& token : tokens) {
        int byte = parse_byte_token(token);
        if (byte >= 0) {
          pending += static_cast<char>(byte);
          ++pending_count;
        } else {
          flush();
          out.push_back(token);
        }
      }
      flush();
      break;
    }
    case HfDecoderStep::Kind::fuse: {
      std::string joined;
      for (const std::string& token : tokens) joined += token;
      out.push_back(std::move(joined));
      break;
    }
    case HfDecoderStep::Kind::strip:
      for (const std::string& token : tokens) {
        size_t begin = 0, end = token.size();
        for (int k = 0; k < step.start && token.compare(begin, step.content.size(), step.content) == 0 &&
                        begin + step.content.size() <= end;
             ++k)
          begin += step.content.size();
        for (int k = 0; k < step.stop && end >= begin + step.content.size() &&
                        token.compare(end - step.content.size(), step.content.size(), step.content) == 0;
             ++k)
          end -= step.content.size();
        out.push_back(token.substr(begin, end - begin));
      }
      break;
    case HfDecoderStep::Kind::metaspace:
      for (size_t k = 0; k < tokens.size(); ++k) {
        std::string token = replace_all(tokens[k], step.content, " ");
        if (k == 0 && step.prepend && !token.empty() && token[0] == ' ') token.erase(0, 1);
        out.push_back(std::move(token));
      }
      break;
  }
  tokens = std::move(out);
}

}  // namespace

void index_hf_added_tokens(HfTokenizer::Parts& parts) {
  for (auto& index : parts.added_index)
    for (auto& bucket : index) bucket.clear();
  for (const HfAddedToken& token : parts.added_tokens)
    parts.added_index[token.normalized ? 1 : 0][static_cast<unsigned char>(token.content[0])].push_back(&token);
  for (auto& index : parts.added_index)
    for (auto& bucket : index)
      std::stable_sort(bucket.begin(), bucket.end(), [](const HfAddedToken* a, const HfAddedToken* b) {
        return a->content.size() > b->content.size();
      });
}

std::string apply_hf_normalizer(const std::vector<HfNormalizerStep>& steps, std::string text) {
  for (const HfNormalizerStep& step : steps) {
    switch (step.kind) {
      case HfNormalizerStep::Kind::nfc:
        text = normalize_nfc(text);
        break;
      case HfNormalizerStep::Kind::prepend:
        if (!text.empty()) text = step.text + text;
        break;
      case HfNormalizerStep::Kind::replace:
        text = replace_all(text, step.text, step.replacement);
        break;
    }
  }
  return text;
}

HfTokenizer::HfTokenizer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

int64_t HfTokenizer::vocab_size() const { return static_cast<int64_t>(parts_->id_to_token.size()); }

int32_t HfTokenizer::token_to_id(std::string_view token) const {
  for (const HfAddedToken& added : parts_->added_tokens)
    if (added.content == token) return added.id;
  auto found = parts_->model.vocab.find(token);
  return found == parts_->model.vocab.end() ? -1 : found->second;
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  LATHE_CHECK(id >= 0 && id < vocab_size() && parts_->id_kind[static_cast<size_t>(id)] != 0, "token id ", id,
              " is not a token of this tokenizer (ids 0 to ", vocab_size() - 1, ")");
  return parts_->id_to_token[static_cast<size_t>(id)];
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  encode_into(text, ids, add_special_tokens, /*split_special_tokens=*/false);
  return ids;
}

void HfTokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids, const EncodeOptions& options) const {
  encode_into(text, ids, options.add_special_tokens, options.split_special_tokens);
}

void HfTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids, bool add_special_tokens,
                              bool split_special_tokens) const {
  LATHE_CHECK(find_invalid_utf8(text) == std::string_view::npos, "text to encode is not valid UTF-8 (byte ",
              find_invalid_utf8(text), ")");
  const Parts& parts = *parts_;
  std::vector<Segment> raw_segments, segments;
  split_added_tokens(parts.added_index[0], Segment{std::string(text), -1, true}, split_special_tokens, raw_segments);
  for (Segment& segment : raw_segments) {
    if (segment.added_id >= 0) {
      segments.push_back(std::move(segment));
      continue;
    }
    segment.text = apply_hf_normalizer(parts.normalizer, std::move(segment.text));
    split_added_tokens(parts.added_index[1], segment, split_special_tokens, segments);
  }
  if (add_special_tokens) ids.insert(ids.end(), parts.template_before.begin(), parts.template_before.end());
  for (Segment& segment : segments) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    std::vector<Segment> words{std::move(segment)};
    for (const HfPreTokenizerStep& step : parts.pre_tokenizer) apply_pre_tokenizer_step(step, words);
    for (const Segment& word : words) {
      if (word.text.empty()) continue;
      {
        std::lock_guard<std::mutex> lock(parts.cache->mutex);
        auto found = parts.cache->words.find(word.text);
        if (found != parts.cache->words.end()) {
          ids.insert(ids.end(), found->second.begin(), found->second.end());
          continue;
        }
      }
      size_t first = ids.size();
      encode_word(parts.model, word.text, ids);
      std::lock_guard<std::mutex> lock(parts.cache->mutex);
      if (parts.cache->words.size() < kMaxCachedWords && word.text.size() <= kMaxCachedWordBytes)
        parts.cache->words.emplace(word.text,
                                   std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), parts.template_after.begin(), parts.template_after.end());
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && parts_->id_kind[static_cast<size_t>(id)] == 3;
}

int32_t HfTokenizer::added_token_id(std::string_view spelling) const {
  for (const HfAddedToken& added : parts_->added_tokens)
    if (added.content == spelling) return added.id;
  return -1;
}

std::optional<int32_t> HfTokenizer::bos_token_id() const {
  if (parts_->template_before.empty()) return std::nullopt;
  return parts_->template_before.front();
}

std::optional<int32_t> HfTokenizer::eos_token_id() const {
  if (!parts_->template_after.empty()) return parts_->template_after.back();
  for (const char* spelling : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"})
    if (const int32_t id = token_to_id(spelling); id >= 0) return id;
  return std::nullopt;
}

std::string HfTokenizer::kind() const {
  const Parts& parts = *parts_;
  if (parts.model.byte_fallback) return "Hugging Face SentencePiece-style BPE";
  for (const HfPreTokenizerStep& step : parts.pre_tokenizer)
    if (step.kind == HfPreTokenizerStep::Kind::byte_level) return "Hugging Face byte-level BPE";
  return "Hugging Face BPE";
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Parts& parts = *parts_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::string token = id_to_token(id);
    if (skip_special_tokens && parts.id_kind[static_cast<size_t>(id)] == 3) continue;
    tokens.push_back(std::move(token));
  }
  if (!parts.has_decoder) {
    std::string joined;
    for (size_t k = 0; k < tokens.size(); ++k) joined += (k ? " " : "") + tokens[k];
    return joined;
  }
  for (const HfDecoderStep& step : parts.decoder) apply_decoder_step(step, tokens);
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace lathe
