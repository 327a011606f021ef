// expect_error(body, expected_part): body must throw lathe::Error whose message contains
// expected_part (a gtest failure naming both otherwise). error_message_of(body): the message body
// throws, or "" when it throws nothing.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "lathe/core/error.h"

namespace lathe {

inline void expect_error(const std::function<void()>& body, const std::string& expected_part) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one containing: " << expected_part;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(expected_part), std::string::npos) << error.what();
  }
}

inline std::string error_message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace lathe
