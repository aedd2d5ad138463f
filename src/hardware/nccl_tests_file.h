// hardware/nccl_tests_file.h: measured nccl-tests results, read for `orrery collective --compare`.
//
// Two forms are read. The tables of ../shared/data/hardware: '#' comment lines, a header line of
// column names (size_B, oop_time_us, ...), then one whitespace-separated row per size; the time
// is the out-of-place one (oop_time_us, else the first column whose name has "time"). And
// nccl-tests' own output (all_reduce_perf ... > log): rows "size count type [redop root] time
// algbw busbw #wrong time algbw busbw #wrong" among '#' lines, the out-of-place time taken. Errors
// name the file and line: no rows, a row with too few fields, a size or time that is not a
// positive number, sizes not increasing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace orrery::hw {

struct MeasuredRow {
  uint64_t size = 0;
  double time_us = 0;
  int line = 0;  // in the file
};

Expected<std::vector<MeasuredRow>> parse_nccl_tests(std::string_view text,
                                                    std::string_view file_name);
Expected<std::vector<MeasuredRow>> load_nccl_tests(const std::string& path);

}  // namespace orrery::hw
