// SameFileChecker: byte-for-byte equality with a reference file, false on anything else.
#include "core/same_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace orrery {
namespace same_file_test {

class SameFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("orrery-same-file-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(SameFile, only_identical_bytes_match) {
  // Larger than one 64 KiB comparison block, so a difference in the second block is found.
  std::string bytes(200'000, 'a');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + i % 26);
  const SameFileChecker checker(write("reference", bytes));
  ASSERT_TRUE(checker.usable());
  EXPECT_TRUE(checker.matches(write("copy", bytes)));
  std::string late = bytes;
  late[150'000] = '#';
  EXPECT_FALSE(checker.matches(write("late", late)));
  EXPECT_FALSE(checker.matches(write("shorter", bytes.substr(1))));
  EXPECT_FALSE(checker.matches((dir_ / "missing").string()));
  EXPECT_FALSE(checker.matches(dir_.string()));  // a directory
}

TEST_F(SameFile, an_empty_reference_matches_only_empty_files) {
  const SameFileChecker checker(write("empty", ""));
  ASSERT_TRUE(checker.usable());
  EXPECT_TRUE(checker.matches(write("also-empty", "")));
  EXPECT_FALSE(checker.matches(write("one-byte", "x")));
}

TEST_F(SameFile, a_reference_too_large_or_unreadable_matches_nothing) {
  const std::string path = write("big", std::string(100, 'x'));
  const SameFileChecker small_limit(path, 99);
  EXPECT_FALSE(small_limit.usable());
  EXPECT_FALSE(small_limit.matches(path));
  const SameFileChecker missing((dir_ / "missing").string());
  EXPECT_FALSE(missing.usable());
  EXPECT_FALSE(missing.matches(path));
}

}  // namespace same_file_test
}  // namespace orrery
