// fuzz/fuzz_support.h: what every libFuzzer target of orrery shares (docs/fuzzing.md).
//
// Most readers take a path, as the command line gives them: an input is written to one file per
// process (under $TMPDIR, /tmp by default) and read back from there. A target returns 0 whatever
// the reader answers: an Error is the right answer to most inputs; a crash, a leak, undefined
// behaviour, a timeout or an allocation above libFuzzer's -rss_limit_mb is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace orrery::fuzz {

// Writes `data` to this process's file with the name ending `suffix` (".et", ".json", ...) and
// returns its path. The file is rewritten by every input.
inline std::string write_input(const uint8_t* data, size_t size, std::string_view suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/orrery-fuzz-" +
                     std::to_string(::getpid()) + std::string(suffix);
  if (std::FILE* file = std::fopen(path.c_str(), "wb")) {
    if (size > 0) (void)std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  return path;
}

// The input as text.
inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace orrery::fuzz
