#include "network/yaml_text.h"

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace orrery::net {

namespace {

// Walks the tree without recursion (a deep document must not exhaust the stack), counting nodes
// with aliases expanded and checking each mapping's keys.
Status check_tree(const YAML::Node& root, std::string_view file_name, size_t budget) {
  std::vector<YAML::Node> pending{root};
  size_t visited = 0;
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (++visited > budget) {
      return Error::make(ErrorKind::kParse,
                         "{}: the document expands to more than {} nodes (through aliases); "
                         "refusing a tree that large from a text this small",
                         file_name, budget);
    }
    if (node.IsMap()) {
      std::map<std::string, int, std::less<>> seen;
      for (const auto& entry : node) {
        if (entry.first.IsScalar()) {
          const auto [at, fresh] = seen.emplace(entry.first.Scalar(), yaml_line(entry.first, 0));
          if (!fresh) {
            return Error::make(ErrorKind::kConfig,
                               "{}:{}: key '{}' is given twice (first on line {}); a key may "
                               "appear once",
                               file_name, yaml_line(entry.first, 0), entry.first.Scalar(),
                               at->second);
          }
        } else if (!entry.first.IsNull()) {
          // `? [a, b]: x` or `? {a: b}: x`: no orrery file has such keys, and readers take keys as
          // strings (yaml-cpp throws converting a mapping or list to one).
          return Error::make(ErrorKind::kConfig, "{}:{}: a key must be a plain value, not a {}",
                             file_name, yaml_line(entry.first, 0),
                             entry.first.IsMap() ? "mapping" : "list");
        }
        pending.push_back(entry.second);
      }
    } else if (node.IsSequence()) {
      for (const YAML::Node& item : node) pending.push_back(item);
    }
  }
  return Status::ok();
}

}  // namespace

size_t yaml_node_budget(size_t text_bytes) { return 16 * text_bytes + 100'000; }

int yaml_line(const YAML::Node& node, int unknown) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : unknown;
}

Expected<YAML::Node> parse_yaml_text(std::string_view text, std::string_view file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    return Error(ErrorKind::kParse, fmt::format("{}:{}: not valid YAML: {}", file_name,
                                                error.mark.line + 1, error.msg));
  }
  if (Status status = check_tree(root, file_name, yaml_node_budget(text.size())); !status) {
    return status.error();
  }
  return root;
}

}  // namespace orrery::net
