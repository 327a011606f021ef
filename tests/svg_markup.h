// Checks on generated SVG shared by the chart tests: self-contained (no scripts, links or external
// resources, no "nan"/"inf" written as numbers) and balanced markup, without an XML library.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lathe {

// Every opened element is closed in order (self-closing ones need nothing): enough to catch a
// broken generator without an XML library.
inline bool tags_balance(const std::string& svg, std::string& problem) {
  std::vector<std::string> open;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    size_t end = svg.find('>', at);
    if (end == std::string::npos) return problem = "unterminated tag", false;
    std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.empty()) return problem = "empty tag", false;
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return problem = "unexpected </" + name + ">", false;
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  if (!open.empty()) return problem = "unclosed <" + open.back() + ">", false;
  return true;
}

inline void expect_self_contained_and_balanced(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  for (const char* forbidden : {"<script", "href", "url(", "@import", "<image", "<foreignObject", "nan", "inf"})
    EXPECT_EQ(svg.find(forbidden), std::string::npos) << forbidden;
  std::string problem;
  EXPECT_TRUE(tags_balance(svg, problem)) << problem;
}

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace lathe
