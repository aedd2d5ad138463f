// Tiny files that claim to be huge, and host traces whose call tree is broken (issue 17): an error
// or a named note, exit codes as documented, and memory that grows with what was read (the child's
// peak resident set stays under kMemoryLimitKb for every input here, all under 1 MB).
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <string>

#include "chakra/trace_builder.h"
#include "e2e/measured_run.h"

namespace orrery {
namespace hostile_files_test {

using test::TempDir;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string gzip(const std::string& bytes) {
  z_stream stream{};
  std::string out(compressBound(static_cast<uLong>(bytes.size())) + 64, '\0');
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

class HostileFiles : public ::testing::Test {
 protected:
  Measured run(const std::vector<std::string>& args) { return run_measured(args, dir.file("")); }
  static void expect_error(const Measured& result, const std::string& fragment) {
    EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
    EXPECT_NE(result.err.find("orrery: error: "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(fragment), std::string::npos) << result.err;
    EXPECT_LT(result.max_rss_kb, kMemoryLimitKb) << "peak resident set in KB";
  }
  TempDir dir;
};

// "A truncated or forged .json.gz whose gzip trailer claims a huge size makes convert reserve
// gigabytes (3.9 GB for a 1.3 KB file, then bad_alloc)"
TEST_F(HostileFiles, a_gzip_trailer_claiming_gigabytes_reserves_nothing) {
  const std::string host = R"({"schema": "1.0.1", "pid": 1, "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "parent": 1, "tid": 0},
    {"id": 2, "name": "aten::mm", "parent": 1, "tid": 1}]})";
  std::string forged = gzip(host);
  ASSERT_LT(forged.size(), 1400u);
  // ISIZE, the last 4 bytes: 0xfffffff0 (4 GiB - 16).
  forged.replace(forged.size() - 4, 4, std::string("\xf0\xff\xff\xff", 4));
  write(dir.file("forged.json.gz"), forged);
  expect_error(run({"convert", "--host", dir.file("forged.json.gz"), "-o", dir.file("out.et")}),
               "forged.json.gz");
  // Cut short: the same.
  const std::string whole = gzip(host);
  write(dir.file("cut.json.gz"), whole.substr(0, whole.size() / 2));
  expect_error(run({"convert", "--host", dir.file("cut.json.gz"), "-o", dir.file("out.et")}),
               "cut.json.gz");
  // The intact file converts.
  write(dir.file("good.json.gz"), whole);
  const Measured good =
      run({"convert", "--host", dir.file("good.json.gz"), "-o", dir.file("good.et")});
  EXPECT_EQ(good.exit_code, 0) << good.err;
}

// "a 16-byte .et whose record length claims 1 GiB allocates it before reporting truncation"
TEST_F(HostileFiles, a_record_length_claiming_a_gibibyte_costs_sixteen_bytes) {
  write(dir.file("claims.et"), std::string("\x80\x80\x80\x80\x04", 5) + std::string(11, 'x'));
  for (const char* verb : {"inspect", "validate", "to-json"}) {
    expect_error(run({"trace", verb, dir.file("claims.et")}),
                 "record 0 at byte 0 is truncated: its length is 1073741824 bytes but the file "
                 "ends after 11");
  }
}

// "a 51 KB .et of zero-length records became millions of nodes and 6.4 GB"
TEST_F(HostileFiles, a_gzip_of_zero_length_records_is_refused_at_the_first) {
  std::string bytes = std::string("\x07\x0a\x05", 3) + "0.0.4";  // GlobalMetadata{version}
  bytes += std::string(50'000'000, '\0');
  const std::string compressed = gzip(bytes);
  ASSERT_LT(compressed.size(), 60'000u);
  write(dir.file("zeros.0.et"), compressed);
  expect_error(run({"trace", "inspect", dir.file("zeros.0.et")}),
               "record 1 at byte 8 is empty (length 0)");
}

// "host traces with parent cycles or missing parents converted without a word"
TEST_F(HostileFiles, host_traces_with_parent_cycles_or_missing_parents_are_named) {
  write(dir.file("host.json"), R"({"schema": "1.0.1", "pid": 1, "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "parent": 1, "tid": 0},
    {"id": 2, "name": "aten::mm", "parent": 3, "tid": 1},
    {"id": 3, "name": "aten::add", "parent": 2, "tid": 1},
    {"id": 4, "name": "aten::relu", "parent": 99, "tid": 1}]})");
  const Measured result =
      run({"convert", "--host", dir.file("host.json"), "-o", dir.file("host.et")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string said = result.out + result.err;
  EXPECT_NE(said.find("2 ops whose parents form a cycle (the call tree is damaged; taken as "
                      "top-level)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("node 2 'aten::mm' (parent 3)"), std::string::npos) << said;
  EXPECT_NE(said.find("1 ops whose parent is not in the trace (taken as top-level)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("node 4 'aten::relu' (parent 99)"), std::string::npos) << said;
  // A root that is its own parent (what PyTorch writes) is not a cycle.
  EXPECT_EQ(said.find("(parent 1)"), std::string::npos) << said;
}

}  // namespace hostile_files_test
}  // namespace orrery
