// The converter on real PyTorch traces: the small ones bundled in tests/data/pytorch, the ResNet
// traces of facebookresearch/param from ../shared/data when present.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "convert/host_trace.h"
#include "convert/kineto_trace.h"
#include "convert_test_support.h"

namespace orrery::convert {
namespace real_traces_test {

using test::find_attr;
using test::TempDir;

struct Converted {
  Conversion conversion;
  chakra::ValidationReport checks;
  size_t written_nodes = 0;
  std::map<int32_t, size_t> written_types;  // node type -> count, in the file as written
};

// Converts, writes and validates; fails the test on any error. It writes in its own folder, not in
// a TempDir, which would wipe the caller's TempDir of the same test name.
Converted convert_and_check(const std::string& host_path, const std::string& device_path = "") {
  Converted result;
  Expected<HostTrace> host = read_host_trace(host_path);
  EXPECT_TRUE(host) << host.error().message();
  if (!host) return result;
  std::optional<KinetoTrace> kineto;
  if (!device_path.empty()) {
    Expected<KinetoTrace> read = read_kineto_trace(device_path);
    EXPECT_TRUE(read) << read.error().message();
    if (!read) return result;
    kineto = std::move(*read);
  }
  Expected<Conversion> conversion = convert_pytorch_trace(*host, kineto ? &*kineto : nullptr, {});
  EXPECT_TRUE(conversion) << conversion.error().message();
  if (!conversion) return result;
  result.conversion = std::move(*conversion);
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("orrery-convert-check-" + std::to_string(::getpid()) + ".et"))
                              .string();
  const Status written = write_conversion(result.conversion, out);
  EXPECT_TRUE(written) << written.error().message();
  result.checks = test::validate_file(out, &result.written_nodes);
  if (Expected<chakra::TraceGraph> graph = chakra::load_trace(out)) {
    for (chakra::NodeIndex at = 0; at < graph->size(); ++at)
      ++result.written_types[graph->type(at)];
  }
  std::filesystem::remove(out);
  EXPECT_TRUE(result.checks.diagnostics().empty()) << test::findings(result.checks);
  test::expect_forward_edges(result.conversion);
  return result;
}

size_t count_named(const Expected<HostTrace>& host, std::string_view name) {
  size_t count = 0;
  for (const HostOp& op : host->ops()) {
    if (op.name == name) ++count;
  }
  return count;
}

TEST(RealTraces, chakra_1_0_2_all_gather_loop_from_the_host_trace) {
  const Converted result =
      convert_and_check(test::pytorch_data("chakra_1.0.2-chakra.0.0.4.json.gz"));
  const ConversionReport& report = result.conversion.report;
  EXPECT_EQ(report.host_nodes, 263u);
  EXPECT_EQ(result.written_nodes, report.output_nodes);
  ASSERT_EQ(report.comms.size(), 10u);
  for (const CommRecord& comm : report.comms) {
    EXPECT_EQ(comm.comm_type, ChakraProtoMsg::ALL_GATHER);
    EXPECT_EQ(comm.bytes, 4u) << "one float per rank";
  }
  EXPECT_EQ(test::count_types(result.conversion).at("METADATA_NODE"), 1u);
  ASSERT_EQ(report.process_group_texts.size(), 1u);
  EXPECT_NE(report.process_group_texts[0].find("\"pg_name\": \"0\""), std::string::npos);
}

// The same trace, plain or gzip, converts to the same nodes; and a conversion run twice gives the
// same bytes.
TEST(RealTraces, plain_and_gzip_inputs_convert_alike_and_runs_repeat_exactly) {
  TempDir dir;
  for (const char* name : {"linear_et.json", "linear_kineto.json"}) {
    const std::string command = "gzip -dc '" + test::pytorch_data(std::string(name) + ".gz") +
                                "' > '" + dir.file(name) + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  const Converted gz = convert_and_check(test::pytorch_data("linear_et.json.gz"),
                                         test::pytorch_data("linear_kineto.json.gz"));
  const Converted plain =
      convert_and_check(dir.file("linear_et.json"), dir.file("linear_kineto.json"));
  ASSERT_EQ(gz.conversion.nodes.size(), plain.conversion.nodes.size());
  ASSERT_GT(gz.conversion.nodes.size(), 1000u);
  for (size_t at = 0; at < gz.conversion.nodes.size(); ++at) {
    ASSERT_EQ(gz.conversion.nodes[at].SerializeAsString(),
              plain.conversion.nodes[at].SerializeAsString())
        << "node " << gz.conversion.nodes[at].id();
  }
  ConvertOptions options;
  for (const char* out : {"a.et", "b.et"}) {
    Expected<ConversionReport> report = convert_files(
        dir.file("linear_et.json"), dir.file("linear_kineto.json"), dir.file(out), options);
    ASSERT_TRUE(report) << report.error().message();
  }
  const std::string first = test::read_bytes(dir.file("a.et"));
  EXPECT_GT(first.size(), 100'000u);
  EXPECT_TRUE(first == test::read_bytes(dir.file("b.et")));
}

TEST(RealTraces, pt2_schema_1_1_1_converts) {
  const Converted result = convert_and_check(test::pytorch_data("pt2_et.json.gz"));
  EXPECT_EQ(result.conversion.report.schema, "1.1.1-chakra.0.0.4");
  EXPECT_EQ(result.conversion.report.host_nodes, 20u);
  EXPECT_GT(result.conversion.report.host_ops, 10u);
}

TEST(RealTraces, simple_add_pair_takes_kernel_durations_from_kineto) {
  const Converted result =
      convert_and_check(test::pytorch_data("benchmark_simple_add_et.json.gz"),
                        test::pytorch_data("benchmark_simple_add_trace.json.gz"));
  const ConversionReport& report = result.conversion.report;
  EXPECT_EQ(report.host_ops_linked, 36u);
  EXPECT_EQ(report.host_ops_linkable, 36u);
  EXPECT_EQ(report.gpu_events, 4u);
  EXPECT_EQ(report.gpu_events_linked, 4u);
  EXPECT_EQ(report.kernels, 4u);
  // The kernels as Kineto measured them (us), launched by the ops whose time encloses the launch.
  std::vector<std::pair<uint64_t, int64_t>> kernels;  // (duration, launching host op)
  for (const auto& node : result.conversion.nodes) {
    if (find_attr(node, "stream") == nullptr) continue;
    kernels.emplace_back(node.duration_micros(), find_attr(node, "host_op_id")->int64_val());
  }
  EXPECT_EQ(kernels, (std::vector<std::pair<uint64_t, int64_t>>{{5, 8}, {5, 13}, {3, 36}, {3, 58}}))
      << "two uniform_ kernels, two add kernels";
}

TEST(RealTraces, linear_pair_links_every_host_op_and_names_other_iterations) {
  const Converted result = convert_and_check(test::pytorch_data("linear_et.json.gz"),
                                             test::pytorch_data("linear_kineto.json.gz"));
  const ConversionReport& report = result.conversion.report;
  EXPECT_EQ(report.schema, "1.0.1");
  EXPECT_EQ(report.host_ops_linkable, 928u);
  EXPECT_EQ(report.host_ops_linked, 928u);
  EXPECT_GT(report.kernels, 100u);
  EXPECT_LT(report.gpu_events_linked, report.gpu_events)
      << "the Kineto trace spans many iterations, the host trace one";
  uint64_t dropped_gpu = 0;
  for (const ConversionNote& note : report.notes) {
    if (note.what.find("GPU events") != std::string::npos && note.dropped)
      dropped_gpu += note.count;
  }
  EXPECT_EQ(report.gpu_events_linked + dropped_gpu, report.gpu_events)
      << "every GPU event is either linked or counted as dropped";
  // Every kernel node lasts as long as a kernel of its name did in the Kineto trace.
  Expected<KinetoTrace> kineto = read_kineto_trace(test::pytorch_data("linear_kineto.json.gz"));
  ASSERT_TRUE(kineto);
  std::map<std::string, std::multiset<uint64_t>> measured;
  for (const KinetoEvent& event : kineto->events()) {
    if (event.category == KinetoCategory::kKernel)
      measured[std::string(event.name)].insert(static_cast<uint64_t>((event.dur_ns + 500) / 1000));
  }
  size_t checked = 0;
  for (const auto& node : result.conversion.nodes) {
    if (find_attr(node, "stream") == nullptr || measured.count(node.name()) == 0) continue;
    EXPECT_GE(measured[node.name()].count(node.duration_micros()), 1u) << node.name();
    ++checked;
  }
  EXPECT_EQ(checked, report.kernels);
  EXPECT_NE(report.durations.find("CPU time from Kineto"), std::string::npos);
}

TEST(RealTraces, resnet_host_traces_hold_their_collectives) {
  if (!test::shared_data_present())
    GTEST_SKIP() << "no ../shared/data: the ResNet traces are there";
  for (const char* file :
       {"1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz", "1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz"}) {
    SCOPED_TRACE(file);
    const std::string path = test::param_input(file);
    Expected<HostTrace> host = read_host_trace(path);
    ASSERT_TRUE(host) << host.error().message();
    EXPECT_EQ(count_named(host, "record_param_comms"), 27u);
    const Converted result = convert_and_check(path);
    const ConversionReport& report = result.conversion.report;
    EXPECT_GT(report.host_ops, 1000u);
    std::map<int32_t, size_t> by_type;
    std::map<int32_t, uint64_t> bytes;
    for (const CommRecord& comm : report.comms) {
      ++by_type[comm.comm_type];
      bytes[comm.comm_type] += comm.bytes;
    }
    EXPECT_EQ(by_type[ChakraProtoMsg::ALL_REDUCE], 15u);
    EXPECT_EQ(by_type[ChakraProtoMsg::BROADCAST], 6u);
    EXPECT_EQ(report.comms.size(), 21u);
    // Sums of num_elem x elem_bytes over the tensors of the 15 nccl:all_reduce and the 6
    // nccl:broadcast ops, counted in the JSON by a separate script: the same step in both files.
    EXPECT_EQ(bytes[ChakraProtoMsg::ALL_REDUCE], 306'684'384u);
    EXPECT_EQ(bytes[ChakraProtoMsg::BROADCAST], 638'712u);
    // The written file holds them as COMM_COLL nodes.
    EXPECT_EQ(result.written_types.at(ChakraProtoMsg::COMM_COLL_NODE), 21u);
    // The other 6 of the 27 record_param_comms are DDP's waits: kept as host ops, and said so.
    const ConversionNote* waits = nullptr;
    for (const ConversionNote& note : report.notes)
      if (note.what.find("record_param_comms that move no data") == 0) waits = &note;
    ASSERT_NE(waits, nullptr);
    EXPECT_EQ(waits->count, 6u);
    EXPECT_NE(waits->examples[0].find("('wait')"), std::string::npos) << waits->examples[0];
  }
}

TEST(RealTraces, resnet_2gpu_collective_sizes_match_record_param_comms) {
  if (!test::shared_data_present())
    GTEST_SKIP() << "no ../shared/data: the ResNet traces are there";
  const std::string path = test::param_input("1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz");
  Expected<HostTrace> host = read_host_trace(path);
  ASSERT_TRUE(host);
  // The expectation from record_param_comms' own attributes: in_msg_nelems x dtype, per nccl op.
  std::map<uint64_t, uint64_t> expected;  // nccl op id -> bytes
  for (const HostOp& op : host->ops()) {
    if (op.name.substr(0, 5) != "nccl:") continue;
    const HostOp& meta = host->ops()[*host->find(*op.parent)];
    ASSERT_EQ(meta.name, "record_param_comms");
    const std::string dtype = *host->attr_string(meta, "dtype");
    const uint64_t element = dtype == "Float" ? 4 : (dtype == "Long" ? 8 : 0);
    ASSERT_NE(element, 0u) << dtype;
    expected[op.id] = static_cast<uint64_t>(*host->attr_int(meta, "in_msg_nelems")) * element;
    EXPECT_EQ(host->attr_string(meta, "pg_name"), "0");
  }
  ASSERT_EQ(expected.size(), 21u);
  const Converted result = convert_and_check(path);
  uint64_t total = 0;
  for (const CommRecord& comm : result.conversion.report.comms) {
    EXPECT_EQ(comm.bytes, expected.at(comm.host_id)) << "node " << comm.node_id;
    EXPECT_EQ(comm.pg_name, "0");
    total += comm.bytes;
  }
  EXPECT_GT(total, 40'000'000u) << "ResNet's gradients, about 11 M parameters in fp32 per step";
  // The node the collective's bytes come from, as the summary counts them.
  for (const auto& node : result.conversion.nodes) {
    if (node.type() != ChakraProtoMsg::COMM_COLL_NODE) continue;
    EXPECT_EQ(find_attr(node, "pg_name")->string_val(), "0");
    EXPECT_EQ(static_cast<uint64_t>(find_attr(node, "comm_size")->int64_val()),
              expected.at(static_cast<uint64_t>(find_attr(node, "host_op_id")->int64_val())));
  }
}

// The profiler without Kineto (Debian's torch 1.13 on the CPU) exports the Chrome trace's array
// form: a bare list of complete events without categories, pid "CPU functions". It is read as the
// CPU events of a Kineto trace, and links to the execution trace recorded with it.
TEST(RecordedTraces, profiler_array_form_links_to_its_execution_trace) {
  const std::string dir = test::pytorch_data("recorded/mlp_train/");
  Expected<KinetoTrace> profile = read_kineto_trace(dir + "mlp_train_trace.json.gz");
  ASSERT_TRUE(profile) << profile.error().message();
  EXPECT_TRUE(profile->array_form());
  EXPECT_EQ(profile->total_events(), 1272u);
  EXPECT_EQ(profile->events().size(), 1272u) << "every event is a CPU function";
  EXPECT_TRUE(profile->cpu_pids().empty()) << "'CPU functions' is no process id";
  for (const KinetoEvent& event : profile->events())
    ASSERT_EQ(event.category, KinetoCategory::kCpuOp) << event.name;
  const Converted result =
      convert_and_check(dir + "mlp_train_et.json.gz", dir + "mlp_train_trace.json.gz");
  const ConversionReport& report = result.conversion.report;
  EXPECT_TRUE(report.device_array_form);
  EXPECT_EQ(report.host_ops_linkable, 212u);
  EXPECT_EQ(report.host_ops_linked, 212u);
}

TEST(RecordedTraces, a_list_without_events_is_not_a_profiler_trace) {
  for (const char* text : {"[]", "[1, 2, 3]"}) {
    Expected<KinetoTrace> profile = parse_kineto_text("p.json", text);
    ASSERT_FALSE(profile) << text;
    EXPECT_NE(profile.error().message().find("p.json: a JSON list without trace events"),
              std::string::npos)
        << profile.error().message();
  }
}

// DistributedDataParallel over Gloo (PyTorch 1.13) records c10d::allreduce_ with a gloo:all_reduce
// under it (or, for asynchronous work, elsewhere) and no record_param_comms: each gloo op is one
// all-reduce of its bucket, 267,786 and 131,584 floats (the MLP's 399,370 parameters).
TEST(RecordedTraces, ddp_gloo_all_reduces_become_collectives) {
  for (const char* rank : {"0", "1"}) {
    const std::string dir = test::pytorch_data("recorded/ddp/");
    const Converted result = convert_and_check(dir + "rank" + rank + "_et.json.gz",
                                               dir + "rank" + rank + "_trace.json.gz");
    const ConversionReport& report = result.conversion.report;
    ASSERT_EQ(report.comms.size(), 2u) << "rank " << rank;
    EXPECT_EQ(report.comms[0].comm_type, ChakraProtoMsg::ALL_REDUCE);
    EXPECT_EQ(report.comms[1].comm_type, ChakraProtoMsg::ALL_REDUCE);
    EXPECT_EQ(report.comms[0].bytes, 267'786u * 4);
    EXPECT_EQ(report.comms[1].bytes, 131'584u * 4);
    EXPECT_EQ(report.comms[0].bytes + report.comms[1].bytes, 399'370u * 4);
    EXPECT_EQ(report.comms[0].pg_name, "") << "1.0.1 names no process group: the whole job";
    EXPECT_EQ(test::count_types(result.conversion).at("COMM_COLL_NODE"), 2u);
    // The first later op on each bucket's storage (DDP's view of it before copying the reduced
    // gradients out) waits for its all-reduce; found in the trace by hand.
    const std::vector<uint64_t> waiters = rank == std::string("0")
                                              ? std::vector<uint64_t>{296, 308}
                                              : std::vector<uint64_t>{294, 307};
    for (size_t at = 0; at < 2; ++at) {
      EXPECT_EQ(report.comms[at].waiter_id, std::optional<uint64_t>{waiters[at]})
          << "rank " << rank;
      const auto waiter =
          std::find_if(result.conversion.nodes.begin(), result.conversion.nodes.end(),
                       [&](const ChakraProtoMsg::Node& node) { return node.id() == waiters[at]; });
      ASSERT_NE(waiter, result.conversion.nodes.end()) << "rank " << rank;
      EXPECT_EQ(waiter->name(), "aten::as_strided");
      EXPECT_NE(std::find(waiter->data_deps().begin(), waiter->data_deps().end(),
                          report.comms[at].node_id),
                waiter->data_deps().end());
    }
  }
}

}  // namespace real_traces_test
}  // namespace orrery::convert
