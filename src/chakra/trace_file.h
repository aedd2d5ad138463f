// chakra/trace_file.h: reading and writing one rank's .et file as Chakra messages.
//
// TraceReader checks the GlobalMetadata record when it opens a file, then yields one Node at a
// time; load_trace() builds the compact TraceGraph from it. Files from before October 2023 (schema
// 0.0.x, proto2, no GlobalMetadata) are rejected with a message that says so. TraceWriter writes
// GlobalMetadata first and never an empty record (Python readers take a zero-length record for the
// end of the file), so it sets `version` when the metadata would otherwise be empty.
#pragma once

#include <string>

#include "chakra/record_stream.h"
#include "chakra/trace_graph.h"
#include "core/error.h"
#include "et_def.pb.h"

namespace orrery::chakra {

// The version TraceWriter writes when a metadata record would otherwise be empty: the schema
// version ASTRA-sim's own example traces carry.
inline constexpr const char* kDefaultSchemaVersion = "0.0.4";

class TraceReader {
 public:
  // Opens `path` and reads its GlobalMetadata. Fails on a missing, empty, old-schema or corrupt
  // file.
  static Expected<TraceReader> open(const std::string& path);

  const ChakraProtoMsg::GlobalMetadata& metadata() const { return metadata_; }

  // Reads the next node into `node` (reusing its storage). Returns false at the end of the file;
  // an Error naming the file, record and byte offset when a record does not decode.
  Expected<bool> next(ChakraProtoMsg::Node& node);
  // Whether the node last returned carried fields this schema does not define.
  bool last_had_unknown_fields() const { return last_unknown_; }
  // Reads the next record's bytes without decoding them (appended to `bytes`; false at the end
  // of the file). An empty record is the error next() gives for it.
  Expected<bool> next_record(std::string& bytes);

  const std::string& path() const { return records_.path(); }
  bool compressed() const { return records_.compressed(); }
  uint64_t file_bytes() const { return records_.file_bytes(); }
  uint64_t record_index() const { return records_.record_index(); }
  // Bytes of the (uncompressed) stream read so far.
  uint64_t bytes_consumed() const { return records_.bytes_consumed(); }

 private:
  explicit TraceReader(RecordReader records) : records_(std::move(records)) {}

  RecordReader records_;
  ChakraProtoMsg::GlobalMetadata metadata_;
  std::string buffer_;
  bool last_unknown_ = false;
};

// Reads the whole file at `path` into a TraceGraph (finished, ready for lookups by id). Decoding
// errors fail the load; everything else about the trace is left to validation.
Expected<TraceGraph> load_trace(const std::string& path);

class TraceWriter {
 public:
  // Creates `path` (gzip when it ends in ".gz") and writes `metadata` as record 0.
  static Expected<TraceWriter> create(const std::string& path,
                                      ChakraProtoMsg::GlobalMetadata metadata);

  Status write(const ChakraProtoMsg::Node& node) { return records_.write(node); }
  Status close() { return records_.close(); }
  uint64_t bytes_written() const { return records_.bytes_written(); }

 private:
  explicit TraceWriter(RecordWriter records) : records_(std::move(records)) {}
  RecordWriter records_;
};

// True when `message` or any attribute in it carries fields this schema does not define.
bool has_unknown_fields(const ChakraProtoMsg::Node& node);

}  // namespace orrery::chakra
