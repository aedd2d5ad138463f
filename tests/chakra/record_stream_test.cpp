// The .et framing: varint32-delimited records, plain or gzip, and what happens when bytes are bad.
#include "chakra/record_stream.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "chakra/trace_builder.h"

namespace orrery::chakra {
namespace record_stream_test {

using test::TempDir;

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> read_all(const std::string& path) {
  auto reader = RecordReader::open(path);
  EXPECT_TRUE(reader) << reader.error().message();
  std::vector<std::string> records;
  std::string record;
  while (true) {
    Expected<bool> got = reader->next(record);
    EXPECT_TRUE(got) << got.error().message();
    if (!got || !*got) break;
    records.push_back(record);
  }
  return records;
}

TEST(RecordStream, records_are_a_varint_length_then_the_bytes) {
  TempDir dir;
  const std::string path = dir.file("two.et");
  {
    auto writer = RecordWriter::create(path);
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->write_bytes("abc"));
    ASSERT_TRUE(writer->write_bytes(std::string(300, 'x')));  // a two-byte length: 0xac 0x02
    ASSERT_TRUE(writer->close());
  }
  const std::string bytes = read_raw(path);
  ASSERT_EQ(bytes.size(), 1u + 3u + 2u + 300u);
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x03"
                                            "abc"));
  EXPECT_EQ(static_cast<unsigned char>(bytes[4]), 0xac);
  EXPECT_EQ(static_cast<unsigned char>(bytes[5]), 0x02);
  const auto records = read_all(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], "abc");
  EXPECT_EQ(records[1], std::string(300, 'x'));
}

TEST(RecordStream, gz_names_are_written_compressed_and_read_back_transparently) {
  TempDir dir;
  const std::string path = dir.file("trace.et.gz");
  {
    auto writer = RecordWriter::create(path);
    ASSERT_TRUE(writer);
    for (int idx = 0; idx < 1000; ++idx)
      ASSERT_TRUE(writer->write_bytes("record " + std::to_string(idx)));
    ASSERT_TRUE(writer->close());
  }
  const std::string bytes = read_raw(path);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  auto reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  EXPECT_TRUE(reader->compressed());
  const auto records = read_all(path);
  ASSERT_EQ(records.size(), 1000u);
  EXPECT_EQ(records[999], "record 999");
}

TEST(RecordStream, an_empty_record_reads_back_empty) {
  TempDir dir;
  const std::string path = dir.file("empty-record.et");
  write_raw(path, std::string("\x00\x01z", 3));
  const auto records = read_all(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], "");
  EXPECT_EQ(records[1], "z");
}

TEST(RecordStream, a_file_cut_inside_a_record_names_the_record_and_offset) {
  TempDir dir;
  const std::string path = dir.file("cut.et");
  write_raw(path, std::string("\x03"
                              "abc"
                              "\x05"
                              "de",
                              7));
  auto reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  std::string record;
  ASSERT_TRUE(*reader->next(record));
  Expected<bool> second = reader->next(record);
  ASSERT_FALSE(second);
  EXPECT_EQ(
      second.error().message(),
      path + ": record 1 at byte 4 is truncated: its length is 5 bytes but the file ends after 2");
}

TEST(RecordStream, a_file_cut_inside_a_length_prefix_is_reported) {
  TempDir dir;
  const std::string path = dir.file("cut-length.et");
  write_raw(path, std::string("\x01"
                              "a"
                              "\x80",
                              3));
  auto reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  std::string record;
  ASSERT_TRUE(*reader->next(record));
  Expected<bool> second = reader->next(record);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message().find("record 1 at byte 2 is truncated"), std::string::npos);
}

TEST(RecordStream, an_overlong_varint_is_not_a_trace) {
  TempDir dir;
  const std::string path = dir.file("varint.et");
  write_raw(path, std::string("\xff\xff\xff\xff\xff\xff\x01", 7));
  auto reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  std::string record;
  Expected<bool> got = reader->next(record);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message().find("malformed length prefix"), std::string::npos);
}

TEST(RecordStream, an_implausible_length_is_rejected_before_allocating) {
  TempDir dir;
  const std::string path = dir.file("huge.et");
  write_raw(path, std::string("\xff\xff\xff\xff\x0f", 5));  // 4 GiB - 1
  auto reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  std::string record;
  Expected<bool> got = reader->next(record);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message().find("claims 4294967295 bytes"), std::string::npos);
}

TEST(RecordStream, a_truncated_gzip_file_is_an_error_not_a_short_trace) {
  TempDir dir;
  const std::string whole = dir.file("whole.et.gz");
  {
    auto writer = RecordWriter::create(whole);
    ASSERT_TRUE(writer);
    for (int idx = 0; idx < 20000; ++idx)
      ASSERT_TRUE(writer->write_bytes("payload " + std::to_string(idx * 7919)));
    ASSERT_TRUE(writer->close());
  }
  const std::string bytes = read_raw(whole);
  const std::string cut = dir.file("cut.et.gz");
  write_raw(cut, bytes.substr(0, bytes.size() / 2));
  auto reader = RecordReader::open(cut);
  ASSERT_TRUE(reader);
  std::string record;
  Expected<bool> got = true;
  size_t records = 0;
  while (got && *got) {
    got = reader->next(record);
    if (got && *got) ++records;
  }
  EXPECT_FALSE(got) << "read " << records << " records of a cut gzip file without an error";
  EXPECT_LT(records, 20000u);
}

TEST(RecordStream, a_missing_file_names_the_path) {
  auto reader = RecordReader::open("/nonexistent/dir/trace.et");
  ASSERT_FALSE(reader);
  EXPECT_EQ(reader.error().message(),
            "/nonexistent/dir/trace.et: cannot open: No such file or directory");
}

}  // namespace record_stream_test
}  // namespace orrery::chakra
