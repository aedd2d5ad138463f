// escape_markup: the five characters XML and HTML give meaning to become entities; nothing else
// changes (bytes of UTF-8 text pass through).
#include "core/markup.h"

#include <gtest/gtest.h>

namespace orrery {
namespace markup_test {

TEST(Markup, the_five_special_characters_become_entities_and_nothing_else_changes) {
  EXPECT_EQ(escape_markup("a<b && c>'d' \"e\""),
            "a&lt;b &amp;&amp; c&gt;&#39;d&#39; &quot;e&quot;");
  EXPECT_EQ(escape_markup("GPT-3 175B, 4,096 NPUs \xc3\x97 8"),
            "GPT-3 175B, 4,096 NPUs \xc3\x97 8");
  EXPECT_EQ(escape_markup(""), "");
  EXPECT_EQ(escape_markup("&amp;"), "&amp;amp;");  // escaping twice is visible, not idempotent
}

}  // namespace markup_test
}  // namespace orrery
