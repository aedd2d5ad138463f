// chakra/comm_groups.h: communicator groups, the sets of ranks a collective runs over.
//
// Groups come from three places, all keyed by the `pg_name` a COMM_COLL node carries: the whole
// job (pg_name "" or "0"), a communicator-group file (`{"1": [0, 1, 2, 3], "2": [4, 5]}`,
// ASTRA-sim's --comm-group-configuration), and METADATA nodes whose `inputs.values` hold a
// Python-style list of process groups (`[{'pg_name': '1', 'ranks': [0, 1]}, ...]`; an empty rank
// list means all). docs/formats/configs.md lists the forms real traces carry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace orrery::chakra {

struct CommGroup {
  std::string name;             // the pg_name
  std::vector<uint32_t> ranks;  // ascending, no duplicates, all below the job's rank count
};

class CommGroups {
 public:
  // The group of all `rank_count` ranks, named "".
  explicit CommGroups(uint32_t rank_count);

  uint32_t rank_count() const { return rank_count_; }
  // Adds or replaces a group. Error (kConfig) for a rank out of range or listed twice, or an empty
  // list (for files; see add_from_metadata for the "all ranks" convention).
  Status add(const std::string& name, std::vector<uint32_t> ranks, const std::string& where);
  // The group a pg_name names: "" and "0" are all ranks unless a group "0" was given. nullptr when
  // unknown.
  const CommGroup* find(const std::string& pg_name) const;
  const CommGroup& all() const { return all_; }
  const std::map<std::string, CommGroup>& named() const { return groups_; }

 private:
  uint32_t rank_count_;
  CommGroup all_;
  std::map<std::string, CommGroup> groups_;
};

// Reads a communicator-group file into `groups`. Errors name the file, line and group id: not an
// object, a group id that is not a decimal number, a value that is not a list of non-negative
// integers, a rank out of range, a duplicate. A file that fails adds no group at all.
Status load_comm_group_file(const std::string& path, CommGroups& groups);
// The same for a file's text; `name` stands for the file in messages.
Status parse_comm_group_text(const std::string& name, std::string text, CommGroups& groups);

// Parses the process groups a METADATA node carries in `inputs.values` (Python-style: single
// quotes, True/False/None allowed) and adds them. `where` names the node for errors. Text that
// holds no process-group list is ignored (returns ok and adds nothing); text that mentions pg_name
// but does not read is an Error (kParse). Either all groups of the text are added or none.
Status add_groups_from_metadata(std::string_view inputs_values, const std::string& where,
                                CommGroups& groups);

}  // namespace orrery::chakra
