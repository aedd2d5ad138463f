#include "network/yaml_text.h"

#include <string>

#include <fmt/format.h>

namespace orrery::net {

Expected<YAML::Node> parse_yaml_text(std::string_view text, std::string_view file_name) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    return Error(ErrorKind::kParse, fmt::format("{}:{}: not valid YAML: {}", file_name,
                                                error.mark.line + 1, error.msg));
  }
}

}  // namespace orrery::net
