// quote_input and printable_error_message (core/quote_input.h): control characters escaped, long
// text cut at a UTF-8 boundary with its full size named, problem-separating newlines kept.
#include "lathe/core/quote_input.h"

#include <gtest/gtest.h>

#include <string>

namespace lathe {
namespace {

TEST(QuoteInput, EscapesControlCharactersAndKeepsShortText) {
  EXPECT_EQ(quote_input("plain text"), "plain text");
  EXPECT_EQ(quote_input(std::string("a\nb\tc\x1b[31m\x7f", 11)), "a\\nb\\tc\\x1b[31m\\x7f");
  EXPECT_EQ(quote_input(std::string("nul\0x", 5)), "nul\\x00x");
}

TEST(QuoteInput, ShortensAtACharacterBoundary) {
  EXPECT_EQ(quote_input(std::string(300, 'x'), 200), std::string(200, 'x') + "... (300 bytes)");
  // "é" is two bytes (C3 A9): a cut at byte 5 of "abcdé..." would split it, so 4 bytes are kept.
  const std::string text = "abcd\xC3\xA9" + std::string(10, 'z');
  EXPECT_EQ(quote_input(text, 5), "abcd... (16 bytes)");
}

TEST(PrintableErrorMessage, KeepsProblemLinesAndShortensLongOnes) {
  EXPECT_EQ(printable_error_message("first problem\nsecond problem"), "first problem\nsecond problem");
  EXPECT_EQ(printable_error_message("bell\a"), "bell\\x07");
  const std::string long_line = std::string(750, 'a') + std::string(2000, 'm') + std::string(250, 'z');
  const std::string printed = printable_error_message("short\n" + long_line);
  EXPECT_EQ(printed, "short\n" + std::string(750, 'a') + " [... 2000 bytes left out ...] " + std::string(250, 'z'));
}

}  // namespace
}  // namespace lathe
