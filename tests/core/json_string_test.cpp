// append_json_string: what it writes must read back as the same text through nlohmann-json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/json_config.h"

namespace orrery {
namespace json_string_test {

TEST(JsonString, escapes_quotes_backslashes_and_control_characters) {
  std::string out = "x=";
  append_json_string(out, "a\"b\\c\nd\te\rf\x01g");
  EXPECT_EQ(out, R"(x="a\"b\\c\nd\te\rf\u0001g")");
  const std::string text = std::string("tab\t nul") + '\0' + "bell\x07 high \xc3\xa9";
  std::string literal;
  append_json_string(literal, text);
  EXPECT_EQ(nlohmann::json::parse(literal).get<std::string>(), text);
}

}  // namespace json_string_test
}  // namespace orrery
