// The regular expressions of Hugging Face pre-tokenizer `Split` patterns (GPT-2, Llama 3, Qwen 2,
// ...), matched with Oniguruma's semantics (leftmost match; alternatives tried in order; greedy
// quantifiers that backtrack) by a small backtracking matcher over code points.
//
// Supported syntax, enough for the published split patterns: literals and escaped punctuation,
// \r \n \t \f \v, \xHH, \x{H..}, \s \S, \p{X} \P{X} (general category: L, N, Lu, Nd, ...), classes [...] and
// [^...] with ranges, groups (...) (?:...) (?i:...), negative/positive lookahead (?!...) (?=...),
// alternation |, quantifiers ? * + {m} {m,} {m,n}. Anything else (lazy or possessive quantifiers,
// anchors, backreferences, \d, \w, '.') is rejected with a lathe::Error naming the construct, so an
// unknown pattern never splits silently wrong. Case-insensitive groups fold ASCII letters plus
// U+017F (long s) and U+212A (Kelvin), the Unicode simple folds onto ASCII.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lathe {

class SplitRegex {
 public:
  // Throws lathe::Error for syntax outside the supported subset.
  explicit SplitRegex(const std::string& pattern);
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  // The successive non-overlapping, non-empty matches in code points as [begin, end) pairs.
  std::vector<std::pair<size_t, size_t>> find_all(const std::vector<uint32_t>& text) const;
  const std::string& pattern() const { return pattern_; }

  struct Node;

 private:
  std::string pattern_;
  std::unique_ptr<Node> root_;
};

}  // namespace lathe
