// tests/scratch_dir.h: a directory of the running test's own.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace orrery::test {

// ctest runs every test of a file as its own process, several at once; a fixed directory shared by
// a file's tests lets one test read a file another is rewriting (a CI failure: an empty system
// file). So each test writes under its suite and name, the same folder on every run so that
// repeated runs leave one folder per test behind, not one per run.
inline std::filesystem::path scratch_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "orrery-" + tag;
  if (info != nullptr) name += std::string("-") + info->test_suite_name() + "-" + info->name();
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace orrery::test
