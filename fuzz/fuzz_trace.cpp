// fuzz_trace: Chakra .et files, plain and gzip, through everything `orrery trace validate` and
// `trace to-json` do with them: the record reader, GlobalMetadata and Node decoding, the compact
// graph, validation (ids, parents, cycles, attributes, ranges) and the dependency graph.
//
// The first byte picks how the rest reaches the reader: 0 as a plain file; 1 gzip-compressed here
// first (so that the fuzzer explores the records inside a valid gzip stream); anything else as the
// raw bytes (whatever gzip header, body or trailer they carry).
#include <zlib.h>

#include <sstream>
#include <vector>

#include "chakra/dependency_graph.h"
#include "chakra/json_codec.h"
#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "fuzz/fuzz_support.h"

namespace {

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream stream{};
  std::vector<uint8_t> out(compressBound(static_cast<uLong>(size)) + 64);
  if (deflateInit2(&stream, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  stream.next_in = const_cast<Bytef*>(data);
  stream.avail_in = static_cast<uInt>(size);
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  (void)deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  std::string path;
  if (mode == 1) {
    const std::vector<uint8_t> compressed = gzip(data, size);
    path = fuzz::write_input(compressed.data(), compressed.size(), ".et.gz");
  } else {
    path = fuzz::write_input(data, size, ".et");
  }
  Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
  if (graph) {
    const chakra::ValidationReport report = chakra::validate_trace(*graph);
    (void)report.summary_lines(3);
    const chakra::DependencyGraph deps =
        chakra::DependencyGraph::build(*graph, chakra::DependencyKinds::kBoth);
    (void)deps;
  }
  std::ostringstream json;
  (void)chakra::trace_to_json(path, json);
  return 0;
}
