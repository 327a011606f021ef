#include "lathe/text/unicode_text.h"

#include <algorithm>

#include "lathe/core/error.h"
#include "lathe/io/utf8.h"
#include "lathe/text/unicode_tables.h"

namespace lathe {
namespace {

namespace tables = unicode_tables;

// Hangul syllables compose and decompose by arithmetic (Unicode chapter 3.12).
constexpr uint32_t kHangulFirst = 0xAC00, kJamoLFirst = 0x1100, kJamoVFirst = 0x1161, kJamoTFirst = 0x11A7;
constexpr uint32_t kJamoVCount = 21, kJamoTCount = 28, kHangulCount = 11172;

void decompose(uint32_t code_point, std::vector<uint32_t>& out) {
  if (code_point >= kHangulFirst && code_point < kHangulFirst + kHangulCount) {
    uint32_t index = code_point - kHangulFirst;
    out.push_back(kJamoLFirst + index / (kJamoVCount * kJamoTCount));
    out.push_back(kJamoVFirst + (index % (kJamoVCount * kJamoTCount)) / kJamoTCount);
    if (index % kJamoTCount) out.push_back(kJamoTFirst + index % kJamoTCount);
    return;
  }
  const auto* end = tables::kDecompositions + tables::kDecompositionCount;
  const auto* found =
      std::lower_bound(tables::kDecompositions, end, code_point,
                       [](const tables::Decomposition& entry, uint32_t value) { return entry.code_point < value; });
  if (found == end || found->code_point != code_point) {
    out.push_back(code_point);
    return;
  }
  decompose(found->first, out);
  if (found->second) decompose(found->second, out);
}

// The composite of first + second, or 0 when they do not compose.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kJamoLFirst && first < kJamoLFirst + 19 && second >= kJamoVFirst && second < kJamoVFirst + kJamoVCount)
    return kHangulFirst + ((first - kJamoLFirst) * kJamoVCount + (second - kJamoVFirst)) * kJamoTCount;
  if (first >= kHangulFirst && first < kHangulFirst + kHangulCount && (first - kHangulFirst) % kJamoTCount == 0 &&
      second > kJamoTFirst && second < kJamoTFirst + kJamoTCount)
    return first + (second - kJamoTFirst);
  const auto* end = tables::kCompositions + tables::kCompositionCount;
  const auto* found = std::lower_bound(tables::kCompositions, end, std::make_pair(first, second),
                                       [](const tables::Composition& entry, std::pair<uint32_t, uint32_t> pair) {
                                         return std::make_pair(entry.first, entry.second) < pair;
                                       });
  return (found != end && found->first == first && found->second == second) ? found->composite : 0;
}

}  // namespace

namespace {

// ASCII dominates most text: a direct table for it, filled once from the ranges.
struct AsciiCategories {
  UnicodeCategory category[128];
  AsciiCategories();
};

UnicodeCategory lookup_category(uint32_t code_point) {
  const auto* end = tables::kCategoryRanges + tables::kCategoryRangeCount;
  const auto* after =
      std::upper_bound(tables::kCategoryRanges, end, code_point,
                       [](uint32_t value, const tables::CategoryRange& range) { return value < range.first; });
  LATHE_ASSERT(after != tables::kCategoryRanges);
  return {after[-1].major, after[-1].minor};
}

AsciiCategories::AsciiCategories() {
  for (uint32_t c = 0; c < 128; ++c) category[c] = lookup_category(c);
}

}  // namespace

UnicodeCategory unicode_category(uint32_t code_point) {
  if (code_point < 128) {
    static const AsciiCategories ascii;
    return ascii.category[code_point];
  }
  if (code_point >= 0x110000) return {'C', 'n'};
  return lookup_category(code_point);
}

bool is_unicode_white_space(uint32_t code_point) {
  if (code_point < 0x80) return code_point == ' ' || (code_point >= 0x09 && code_point <= 0x0d);
  return code_point == 0x85 || code_point == 0xa0 || code_point == 0x1680 ||
         (code_point >= 0x2000 && code_point <= 0x200a) || code_point == 0x2028 || code_point == 0x2029 ||
         code_point == 0x202f || code_point == 0x205f || code_point == 0x3000;
}

uint8_t canonical_combining_class(uint32_t code_point) {
  if (code_point < 0x300) return 0;
  const auto* end = tables::kCombiningClassRanges + tables::kCombiningClassRangeCount;
  const auto* found =
      std::lower_bound(tables::kCombiningClassRanges, end, code_point,
                       [](const tables::CombiningClassRange& range, uint32_t value) { return range.last < value; });
  return (found != end && found->first <= code_point) ? found->combining_class : 0;
}

void decode_utf8(std::string_view text, std::vector<uint32_t>& code_points, std::vector<size_t>& offsets,
                 const char* what) {
  size_t invalid = find_invalid_utf8(text);
  LATHE_CHECK(invalid == std::string_view::npos, what, " is not valid UTF-8 (byte ", invalid, ")");
  code_points.clear();
  offsets.clear();
  size_t i = 0;
  while (i < text.size()) {
    offsets.push_back(i);
    unsigned char lead = static_cast<unsigned char>(text[i]);
    int length = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    uint32_t value = length == 1 ? lead : length == 2 ? (lead & 0x1fu) : length == 3 ? (lead & 0x0fu) : (lead & 0x07u);
    for (int k = 1; k < length; ++k) value = (value << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3fu);
    code_points.push_back(value);
    i += static_cast<size_t>(length);
  }
  offsets.push_back(text.size());
}

std::string encode_utf8(const std::vector<uint32_t>& code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (uint32_t code_point : code_points) append_utf8(out, code_point);
  return out;
}

std::string normalize_nfc(std::string_view text) {
  // ASCII is its own NFC form: the common case costs one scan.
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);
  std::vector<uint32_t> code_points, decomposed;
  std::vector<size_t> offsets;
  decode_utf8(text, code_points, offsets);
  for (uint32_t code_point : code_points) decompose(code_point, decomposed);
  // Canonical ordering: a stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < decomposed.size();) {
    if (canonical_combining_class(decomposed[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < decomposed.size() && canonical_combining_class(decomposed[end]) != 0) ++end;
    std::stable_sort(
        decomposed.begin() + static_cast<std::ptrdiff_t>(i), decomposed.begin() + static_cast<std::ptrdiff_t>(end),
        [](uint32_t a, uint32_t b) { return canonical_combining_class(a) < canonical_combining_class(b); });
    i = end;
  }
  // Canonical composition: each character joins the last starter unless a character of the same or
  // higher class (or a starter) stands between them.
  std::vector<uint32_t> composed;
  composed.reserve(decomposed.size());
  size_t starter = SIZE_MAX;
  int last_class = -1;
  for (uint32_t code_point : decomposed) {
    int current_class = canonical_combining_class(code_point);
    if (starter != SIZE_MAX) {
      bool blocked =
          last_class != -1 && (last_class == 0 ? composed.size() - 1 != starter : last_class >= current_class);
      uint32_t composite = blocked ? 0 : compose(composed[starter], code_point);
      if (composite) {
        composed[starter] = composite;
        continue;
      }
    }
    if (current_class == 0) starter = composed.size();
    last_class = current_class;
    composed.push_back(code_point);
  }
  return encode_utf8(composed);
}

}  // namespace lathe
