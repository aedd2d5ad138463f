#include "chakra/json_codec.h"

#include <fstream>
#include <optional>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "chakra/trace_file.h"

namespace orrery::chakra {

namespace {

namespace pbutil = google::protobuf::util;

pbutil::JsonPrintOptions print_options() {
  pbutil::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = false;
  return options;
}

}  // namespace

Status trace_to_json(const std::string& et_path, std::ostream& out) {
  Expected<TraceReader> reader = TraceReader::open(et_path);
  if (!reader) return reader.error();
  const pbutil::JsonPrintOptions options = print_options();
  std::string text;
  if (!pbutil::MessageToJsonString(reader->metadata(), &text, options).ok()) {
    return Error::make(ErrorKind::kParse, "{}: the GlobalMetadata has no JSON form", et_path);
  }
  out << "{\"format\":\"" << kJsonFormat << "\",\n\"global_metadata\":" << text << ",\n\"nodes\":[";
  ChakraProtoMsg::Node node;
  bool first = true;
  while (true) {
    Expected<bool> got = reader->next(node);
    if (!got) return got.error();
    if (!*got) break;
    text.clear();
    const auto status = pbutil::MessageToJsonString(node, &text, options);
    if (!status.ok()) {
      return Error::make(ErrorKind::kParse, "{}: node {} has no JSON form: {}", et_path, node.id(),
                         status.message().as_string());
    }
    out << (first ? "\n" : ",\n") << text;
    first = false;
  }
  out << "\n]}\n";
  if (!out) return Error::make(ErrorKind::kIo, "cannot write the JSON output");
  return Status::ok();
}

Status json_to_trace(const std::string& json_path, const std::string& et_path) {
  std::ifstream in(json_path, std::ios::binary);
  if (!in) return Error::make(ErrorKind::kIo, "{}: cannot open", json_path);

  pbutil::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;

  std::optional<TraceWriter> writer;
  std::vector<ChakraProtoMsg::Node> pending;  // nodes seen before the metadata (unusual order)
  std::optional<Error> failure;
  std::string top_key;
  bool saw_format = false;
  bool saw_metadata = false;
  bool saw_nodes = false;
  uint64_t node_index = 0;

  auto fail = [&failure](Error error) {
    if (!failure) failure = std::move(error);
    return false;
  };
  auto write_node = [&](const ChakraProtoMsg::Node& node) {
    if (Status status = writer->write(node); !status) return fail(status.error());
    return true;
  };

  // The callback sees each value as it completes: a node is converted, written and discarded at
  // once, so the document is never held whole.
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (failure) return false;
    if (depth == 1 && event == Event::key) {
      top_key = parsed.get<std::string>();
      return true;
    }
    if (depth == 1 && top_key == "format" && event == Event::value) {
      saw_format = true;
      if (!parsed.is_string() || parsed.get<std::string>() != kJsonFormat) {
        return fail(Error::make(ErrorKind::kParse, "{}: \"format\" is {}, expected \"{}\"",
                                json_path, parsed.dump(), kJsonFormat));
      }
      return true;
    }
    if (depth == 1 && top_key == "global_metadata" && event == Event::object_end) {
      ChakraProtoMsg::GlobalMetadata metadata;
      const auto status = pbutil::JsonStringToMessage(parsed.dump(), &metadata, parse_options);
      if (!status.ok()) {
        return fail(Error::make(ErrorKind::kParse, "{}: global_metadata: {}", json_path,
                                status.message().as_string()));
      }
      Expected<TraceWriter> created = TraceWriter::create(et_path, std::move(metadata));
      if (!created) return fail(created.error());
      writer.emplace(std::move(*created));
      saw_metadata = true;
      for (const auto& node : pending) {
        if (!write_node(node)) return false;
      }
      pending.clear();
      return false;
    }
    if (top_key == "nodes" && depth == 1 && event == Event::array_start) saw_nodes = true;
    if (top_key == "nodes" && depth == 2 && event == Event::object_end) {
      ChakraProtoMsg::Node node;
      const auto status = pbutil::JsonStringToMessage(parsed.dump(), &node, parse_options);
      if (!status.ok()) {
        return fail(Error::make(ErrorKind::kParse, "{}: nodes[{}]: {}", json_path, node_index,
                                status.message().as_string()));
      }
      ++node_index;
      if (writer) {
        write_node(node);
      } else {
        pending.push_back(std::move(node));
      }
      return false;
    }
    return true;
  };

  try {
    // Everything of interest was taken out by the callback; the rest is discarded.
    const nlohmann::json rest =
        nlohmann::json::parse(in, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    static_cast<void>(rest);
  } catch (const nlohmann::json::parse_error& error) {
    if (!failure) {
      return Error::make(ErrorKind::kParse, "{}: {}", json_path, error.what());
    }
  } catch (const nlohmann::json::exception& error) {
    // Not a syntax error but a value nlohmann cannot hold: a number beyond a double's range
    // ("1e999", found by fuzz_trace_json). Its message names the text.
    if (!failure) {
      std::string message = error.what();
      if (const size_t at = message.find("] "); at != std::string::npos)
        message = message.substr(at + 2);
      return Error::make(ErrorKind::kParse, "{}: {} (beyond the range of a double)", json_path,
                         message);
    }
  }
  if (failure) return *failure;
  if (!saw_format || !saw_metadata || !saw_nodes) {
    return Error::make(ErrorKind::kParse,
                       "{}: not a Chakra JSON document: expected the keys \"format\", "
                       "\"global_metadata\" and \"nodes\" (as written by `orrery trace to-json`)",
                       json_path);
  }
  return writer->close();
}

}  // namespace orrery::chakra
