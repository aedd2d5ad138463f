// network/yaml_text.h: YAML text parsed into a node tree, or one error naming the file and line
// (for every YAML input: network files, graph files, RoCE configurations, LIBRA problems).
#pragma once

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace orrery::net {

// kParse error "FILE:LINE: not valid YAML: ..." when `text` does not parse.
Expected<YAML::Node> parse_yaml_text(std::string_view text, std::string_view file_name);

}  // namespace orrery::net
