// read_text_file: a file's bytes, or one error naming the path and what is wrong with it.
#include "core/text_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "scratch_dir.h"

namespace orrery {
namespace {

TEST(TextFile, reads_every_byte_including_nul_and_an_empty_file) {
  const std::filesystem::path dir = test::scratch_dir("text-file");
  const std::string bytes = std::string("a\0b\r\n", 5) + std::string(100'000, 'x');
  std::ofstream(dir / "bytes", std::ios::binary) << bytes;
  Expected<std::string> read = read_text_file(dir / "bytes");
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, bytes);
  std::ofstream(dir / "empty", std::ios::binary).flush();
  Expected<std::string> empty = read_text_file(dir / "empty", "the jobs file");
  ASSERT_TRUE(empty) << empty.error().message();
  EXPECT_EQ(*empty, "");
}

TEST(TextFile, a_missing_file_and_a_folder_are_errors_naming_the_path) {
  const std::filesystem::path dir = test::scratch_dir("text-file");
  const std::string missing = (dir / "none.yml").string();
  Expected<std::string> absent = read_text_file(missing, "the perturbation file");
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(absent.error().message(),
            missing + ": cannot open the perturbation file: No such file or directory");
  EXPECT_EQ(read_text_file(missing).error().message(),
            missing + ": cannot open: No such file or directory");
  // An std::ifstream opens a folder on Linux and reads nothing; it must not pass for an empty file.
  Expected<std::string> folder = read_text_file(dir, "the perturbation file");
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(folder.error().message(), dir.string() + ": is a folder, not the perturbation file");
  EXPECT_EQ(read_text_file(dir).error().message(), dir.string() + ": is a folder, not a file");
  // For readers that stream their file: a folder is refused, anything else is the opener's.
  EXPECT_EQ(refuse_folder(dir, "a model").error().message(),
            dir.string() + ": is a folder, not a model");
  EXPECT_TRUE(refuse_folder(missing));
}

TEST(TextFile, writes_back_what_it_reads_and_names_a_write_that_fails) {
  const std::filesystem::path dir = test::scratch_dir("text-file");
  const std::string bytes = std::string("x\0y", 3) + std::string(70'000, 'z');
  ASSERT_TRUE(write_text_file(dir / "out", bytes));
  EXPECT_EQ(*read_text_file(dir / "out"), bytes);
  Status folder = write_text_file(dir, "x");
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().message(), dir.string() + ": cannot create: Is a directory");
  // A short text sits in the stream's buffer until the close: a full disk must still show.
  if (std::filesystem::exists("/dev/full")) {
    Status full = write_text_file("/dev/full", "short");
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().message(), "/dev/full: cannot write");
  }
}

TEST(TextFile, a_temporary_folder_that_is_not_one_is_an_error_naming_the_variable) {
  const char* saved = std::getenv("TMPDIR");
  const std::string before = saved != nullptr ? saved : "";
  const std::filesystem::path dir = test::scratch_dir("temp-folder");
  ::setenv("TMPDIR", "/nonexistent-orrery-tmp", 1);
  Expected<std::filesystem::path> missing = temp_folder();
  ::setenv("TMPDIR", "/dev/null", 1);
  Expected<std::filesystem::path> file = temp_folder();
  ::setenv("TMPDIR", dir.c_str(), 1);
  Expected<std::filesystem::path> good = temp_folder();
  if (saved != nullptr) {
    ::setenv("TMPDIR", before.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "/nonexistent-orrery-tmp: not a folder for temporary files (TMPDIR)");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().message(), "/dev/null: not a folder for temporary files (TMPDIR)");
  ASSERT_TRUE(good) << good.error().message();
  EXPECT_EQ(*good, dir);
}

}  // namespace
}  // namespace orrery
