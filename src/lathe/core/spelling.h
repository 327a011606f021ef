// "Did you mean": the closest known name to a mistyped one, for error messages.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lathe {

// Levenshtein distance (insertions, deletions, substitutions each cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest `word`, or "" when none is within a typo's reach (2 edits, or a quarter of
// the word for longer words). Ties go to the earliest candidate.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'X'?)" for the closest match, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace lathe
