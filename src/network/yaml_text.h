// network/yaml_text.h: YAML text parsed into a node tree, or one error naming the file and line
// (for every YAML input: network files, graph files, RoCE configurations, LIBRA problems).
//
// Beyond the syntax, three things every reader would otherwise get wrong are refused here: a key
// that is a mapping or a list (YAML's `? [a, b]: x`; readers take keys as strings), a key
// written twice in one mapping (yaml-cpp keeps both and a lookup sees the first, so a file that
// says two things would be read as one of them silently), and aliases that expand the tree far
// beyond the text (`a: &a [..]`, `b: [*a, *a, ...]`, ...), so that what a reader walks is bounded
// by what was read.
#pragma once

#include <cstddef>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace orrery::net {

// The most nodes a parsed tree may hold, counted with aliases expanded: 16 per byte of text plus
// 100,000 (a tree without aliases has at most one node per byte).
size_t yaml_node_budget(size_t text_bytes);

// kParse error "FILE:LINE: not valid YAML: ..." when `text` does not parse; kConfig
// "FILE:LINE: key 'k' is given twice (first on line N)" for a repeated key, and "FILE:LINE: a key
// must be a plain value, not a mapping" (or list); kParse when aliases
// expand the tree beyond yaml_node_budget.
Expected<YAML::Node> parse_yaml_text(std::string_view text, std::string_view file_name);

// The 1-based line a node starts on in its text, or `unknown` for a node without a place there
// (one built in code, or what a lookup of a missing key returns).
int yaml_line(const YAML::Node& node, int unknown = 1);

}  // namespace orrery::net
