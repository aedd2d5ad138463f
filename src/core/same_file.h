// core/same_file.h: is this file byte for byte the same as a reference file?
//
// A trace set of thousands of ranks is often thousands of copies of one file (every data-parallel
// rank of a generated or rescaled workload). Comparing bytes is exact and costs one open, one stat
// and one read per file (one stat when the sizes differ), far less than parsing a trace; ranks
// found identical share one parsed graph.
#pragma once

#include <string>
#include <vector>

namespace orrery {

class SameFileChecker {
 public:
  // Reads `reference` once when it is at most `max_bytes` long; otherwise (or when it cannot be
  // read) every matches() answers false, so callers fall back to reading each file themselves.
  explicit SameFileChecker(const std::string& reference, size_t max_bytes = size_t{64} << 20);

  // Whether `path` has exactly the reference's bytes. False on any error (the caller's own read
  // of the file then reports it). Thread-safe: const and touches no shared state.
  bool matches(const std::string& path) const;

  bool usable() const { return usable_; }

 private:
  std::vector<char> bytes_;
  bool usable_ = false;
};

}  // namespace orrery
