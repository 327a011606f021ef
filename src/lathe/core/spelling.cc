#include "lathe/core/spelling.h"

#include <algorithm>
#include <cstdint>

namespace lathe {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string closest;
  size_t closest_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < closest_distance) closest_distance = distance, closest = candidate;
  }
  if (closest_distance > std::max<size_t>(2, word.size() / 4)) return "";  // too far to be a typo
  return closest;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string closest = closest_match(word, candidates);
  return closest.empty() ? "" : " (did you mean '" + closest + "'?)";
}

}  // namespace lathe
