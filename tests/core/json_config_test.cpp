// JsonConfig (core/json_config.h) with hostile text: keys given twice, numbers beyond a double,
// integers beyond int64, ranges with NaN-free messages.
#include "core/json_config.h"

#include <gtest/gtest.h>

#include <string>

namespace orrery {
namespace json_config_test {

std::string error_of(const std::string& text) {
  Expected<JsonConfig> config = JsonConfig::parse("c.json", text);
  return config ? std::string("(parsed)") : config.error().message();
}

TEST(JsonConfigHostile, a_key_given_twice_is_an_error_naming_both_lines) {
  EXPECT_EQ(error_of("{\n  \"endpoint-delay\": 10,\n  \"x\": 1,\n  \"endpoint-delay\": 20000\n}"),
            "c.json:4: key 'endpoint-delay' is given twice (first on line 2); a key may appear "
            "once");
  // In a nested object too, and only within one object: the same key in two objects is fine.
  EXPECT_EQ(error_of(R"({"a": {"k": 1}, "b": {"k": 2}})"), "(parsed)");
  EXPECT_EQ(error_of("{\"a\": {\"k\": 1,\n \"k\": 2}}"),
            "c.json:2: key 'k' is given twice (first on line 1); a key may appear once");
  // A value that spells the key does not confuse the line search.
  EXPECT_EQ(error_of("{\"name\": \"k\",\n\"k\": 1,\n\"k\": 2}"),
            "c.json:3: key 'k' is given twice (first on line 2); a key may appear once");
}

TEST(JsonConfigHostile, a_number_beyond_a_double_is_an_error_with_its_line) {
  const std::string message = error_of("{\n\"scheduling-policy\": 1e999\n}");
  EXPECT_EQ(message.rfind("c.json:2: ", 0), 0u) << message;
  EXPECT_NE(message.find("1e999"), std::string::npos) << message;
}

// Found by fuzz_json_config: an error message quoting text that is not UTF-8 threw from
// nlohmann's dump (an uncaught exception, exit 134) instead of printing.
TEST(JsonConfigHostile, an_excerpt_of_bytes_that_are_not_utf8_prints_them_replaced) {
  const std::string bytes = "{'pg_n\xd8me': '2'}";
  EXPECT_EQ(json_excerpt(nlohmann::json(bytes)), "\"{'pg_n\xef\xbf\xbdme': '2'}\"");
}

TEST(JsonConfigHostile, nesting_beyond_64_levels_is_refused_before_it_is_built) {
  const std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(error_of(deep), "c.json: lists or objects nested more than 64 deep");
  EXPECT_EQ(error_of("{\"x\": " + std::string(60, '[') + std::string(60, ']') + "}"), "(parsed)");
}

TEST(JsonConfigHostile, integers_are_range_checked_before_any_conversion) {
  auto get = [](const std::string& text) {
    Expected<JsonConfig> config = JsonConfig::parse("c.json", text);
    EXPECT_TRUE(config);
    Expected<std::optional<int64_t>> value = config->get_int("n", 1, 100);
    return value ? std::to_string(value->value_or(-1)) : value.error().message();
  };
  EXPECT_EQ(get(R"({"n": 18446744073709551615})"),
            "c.json:1: key 'n': expected an integer from 1 to 100, found 18446744073709551615");
  EXPECT_EQ(get(R"({"n": 1e300})"),
            "c.json:1: key 'n': expected an integer from 1 to 100, found 1e+300");
  EXPECT_EQ(get(R"({"n": 4.0})"), "4");
  EXPECT_EQ(get(R"({"n": 4.5})"), "c.json:1: key 'n': expected an integer, found 4.5");
  EXPECT_EQ(get(R"({"n": -3})"), "c.json:1: key 'n': expected an integer from 1 to 100, found -3");
}

TEST(JsonConfigHostile, numbers_in_a_range_say_the_range_in_short_form) {
  Expected<JsonConfig> config = JsonConfig::parse("c.json", R"({"bw": 1e-300, "ok": 50})");
  ASSERT_TRUE(config);
  Expected<std::optional<double>> bad = config->get_number_in("bw", 1e-3, 1e9, "GB/s");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "c.json:1: key 'bw': expected a number from 0.001 to 1e+09 GB/s, found 1e-300");
  EXPECT_EQ(config->get_number_in("ok", 1e-3, 1e9)->value_or(0), 50);
}

// The lines of every top-level key in one pass: values that spell a key, nested keys, strings with
// braces, colons and escaped quotes do not count; a key written with an escape is left to line_of.
TEST(JsonConfigLines, top_level_keys_are_found_on_their_lines) {
  Expected<JsonConfig> config = JsonConfig::parse(
      "c.json",
      "{\"name\": \"k\",\n\"k\": {\"inner\": \"{[:\\\"x\\\"\"},\n\n \"2\"  :\n [1, 2],\n"
      "\"e\\u0041\": 3, \"inner2\": [{\"deep\": 1}]}");
  ASSERT_TRUE(config) << config.error().message();
  const auto lines = config->top_level_key_lines();
  EXPECT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines.at("name"), 1);
  EXPECT_EQ(lines.at("k"), 2);
  EXPECT_EQ(lines.at("2"), 4);
  EXPECT_EQ(lines.at("inner2"), 6);
  EXPECT_EQ(lines.count("inner"), 0u);
  EXPECT_EQ(lines.count("deep"), 0u);
  EXPECT_EQ(config->line_of("2"), 4);
}

}  // namespace json_config_test
}  // namespace orrery
