#include "chakra/trace_file.h"

#include <cstdio>
#include <filesystem>

#include <google/protobuf/unknown_field_set.h>

namespace orrery::chakra {

namespace {

bool unknown_empty(const google::protobuf::Message& message) {
  return message.GetReflection()->GetUnknownFields(message).empty();
}

bool is_old_schema_version(const std::string& version) {
  return version == "0.0.1" || version == "0.0.2" || version == "0.0.3";
}

constexpr const char* kOldSchemaAdvice =
    "Chakra traces from before October 2023 (schema 0.0.1 to 0.0.3) are not wire-compatible with "
    "the current schema; regenerate the trace with a current Chakra release";

constexpr const char* kJsonAdvice =
    " (it looks like JSON: `orrery trace from-json` reads documents written by `orrery trace "
    "to-json`)";

// Whether the file's first byte that is not white space opens a JSON object or array. Called only
// on the error path.
bool looks_like_json(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  int c = std::fgetc(file);
  while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = std::fgetc(file);
  std::fclose(file);
  return c == '{' || c == '[';
}

}  // namespace

bool has_unknown_fields(const ChakraProtoMsg::Node& node) {
  if (!unknown_empty(node)) return true;
  for (const auto& attribute : node.attr()) {
    if (!unknown_empty(attribute)) return true;
  }
  return (node.has_inputs() && !unknown_empty(node.inputs())) ||
         (node.has_outputs() && !unknown_empty(node.outputs()));
}

Expected<TraceReader> TraceReader::open(const std::string& path) {
  Expected<RecordReader> records = RecordReader::open(path);
  if (!records) return records.error();
  TraceReader reader(std::move(*records));

  Expected<bool> got = reader.records_.next(reader.buffer_);
  if (!got) {
    if (looks_like_json(path))
      return Error(got.error().kind(), got.error().message() + kJsonAdvice);
    return got.error();
  }
  if (!*got) {
    return Error::make(ErrorKind::kParse,
                       "{}: the file is empty; a Chakra trace starts with a GlobalMetadata record",
                       path);
  }
  if (!reader.metadata_.ParseFromString(reader.buffer_)) {
    return Error::make(
        ErrorKind::kParse,
        "{}: record 0 ({} bytes) does not decode as a Chakra GlobalMetadata; this is "
        "not a Chakra trace{}",
        path, reader.buffer_.size(), looks_like_json(path) ? kJsonAdvice : "");
  }
  // An old-schema file starts with a Node: its varint id in field 1 lands in the unknown fields of
  // GlobalMetadata, whose field 1 is a string.
  const auto& unknown = reader.metadata_.GetReflection()->GetUnknownFields(reader.metadata_);
  if (!unknown.empty()) {
    return Error::make(ErrorKind::kParse,
                       "{}: record 0 is not a GlobalMetadata (it has fields a GlobalMetadata "
                       "cannot have, such as field {}); {}",
                       path, unknown.field(0).number(), kOldSchemaAdvice);
  }
  if (is_old_schema_version(reader.metadata_.version())) {
    return Error::make(ErrorKind::kParse, "{}: schema version {}; {}", path,
                       reader.metadata_.version(), kOldSchemaAdvice);
  }
  return reader;
}

namespace {

// Chakra's Python tools read a zero-length record as the end of the file and ASTRA-sim as a node
// without id, name or type; no Chakra writer produces one. Refused rather than guessed (a
// compressed run of them would otherwise become millions of empty nodes).
Error empty_record(const RecordReader& records) {
  return Error::make(ErrorKind::kParse,
                     "{}: record {} at byte {} is empty (length 0): Chakra's Python tools read "
                     "that as the end of the file and ASTRA-sim as a node without id or type; "
                     "no Chakra writer produces one",
                     records.path(), records.record_index(), records.record_offset());
}

}  // namespace

Expected<bool> TraceReader::next(ChakraProtoMsg::Node& node) {
  Expected<bool> got = records_.next(buffer_);
  if (!got) return got.error();
  if (!*got) return false;
  if (buffer_.empty()) return empty_record(records_);
  if (!node.ParseFromString(buffer_)) {
    return Error::make(
        ErrorKind::kParse, "{}: record {} at byte {} ({} bytes) does not decode as a Chakra Node",
        records_.path(), records_.record_index(), records_.record_offset(), buffer_.size());
  }
  last_unknown_ = has_unknown_fields(node);
  return true;
}

Expected<bool> TraceReader::next_record(std::string& bytes) {
  const size_t before = bytes.size();
  Expected<bool> got = records_.append_next(bytes);
  if (!got) return got.error();
  if (!*got) return false;
  if (bytes.size() == before) return empty_record(records_);
  return true;
}

Expected<TraceGraph> load_trace(const std::string& path) {
  Expected<TraceReader> reader = TraceReader::open(path);
  if (!reader) return reader.error();
  TraceGraph graph;
  graph.set_source(path);
  graph.set_metadata(reader->metadata());
  // Once a sample of nodes shows their average size, a plain file's size tells how many remain:
  // the tables are sized once rather than grown by doubling.
  constexpr uint64_t kSample = 4096;
  const uint64_t file_bytes = reader->compressed() ? 0 : reader->file_bytes();
  ChakraProtoMsg::Node node;
  while (true) {
    Expected<bool> got = reader->next(node);
    if (!got) return got.error();
    if (!*got) break;
    graph.add_node(node);
    if (reader->last_had_unknown_fields()) graph.mark_unknown_fields();
    if (graph.size() == kSample && file_bytes > 0) {
      const uint64_t read = reader->bytes_consumed();
      const uint64_t estimate =
          (file_bytes - std::min(file_bytes, read)) * kSample / std::max<uint64_t>(read, 1);
      graph.reserve_like_current(static_cast<size_t>(estimate + estimate / 16));
    }
  }
  graph.finish();
  return graph;
}

Expected<TraceWriter> TraceWriter::create(const std::string& path,
                                          ChakraProtoMsg::GlobalMetadata metadata) {
  Expected<RecordWriter> records = RecordWriter::create(path);
  if (!records) return records.error();
  if (metadata.ByteSizeLong() == 0) metadata.set_version(kDefaultSchemaVersion);
  TraceWriter writer(std::move(*records));
  if (Status status = writer.records_.write(metadata); !status) return status.error();
  return writer;
}

}  // namespace orrery::chakra
