// Chakra trace I/O throughput on a generated 1,000,000-node trace: writing, streaming the messages
// back, and loading into the compact TraceGraph. Reports nodes/s, MB/s and memory.
//
//   build/bench/bench_chakra_io [--benchmark_repetitions=3]
// With ORRERY_BENCH_KEEP=1 the generated trace stays in the temporary directory
// (orrery-bench-1m.et), for end-to-end runs of the orrery executable on it.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "chakra/trace_file.h"

namespace orrery::chakra {
namespace {

constexpr uint64_t kNodes = 1000000;

std::string bench_path() {
  return (std::filesystem::temp_directory_path() / "orrery-bench-1m.et").string();
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// A training-like node: compute with FLOPs and bytes and two data parents, every tenth an
// all-reduce.
void fill_node(uint64_t id, ChakraProtoMsg::Node& node) {
  node.Clear();
  node.set_id(id);
  node.set_name("layer_" + std::to_string(id % 96) +
                (id % 10 == 9 ? "_grad_allreduce" : "_matmul"));
  if (id > 0) node.add_data_deps(id - 1);
  if (id > 7) node.add_data_deps(id - 7);
  node.set_duration_micros(10 + id % 50);
  auto add = [&node](const char* name) {
    auto* attribute = node.add_attr();
    attribute->set_name(name);
    return attribute;
  };
  add("is_cpu_op")->set_bool_val(false);
  if (id % 10 == 9) {
    node.set_type(ChakraProtoMsg::COMM_COLL_NODE);
    add("comm_type")->set_int64_val(ChakraProtoMsg::ALL_REDUCE);
    add("comm_size")->set_int64_val(static_cast<int64_t>(1 << (16 + id % 8)));
  } else {
    node.set_type(ChakraProtoMsg::COMP_NODE);
    add("num_ops")->set_int64_val(static_cast<int64_t>(1000000 + id));
    add("tensor_size")->set_uint64_val(4096 + id % 4096);
  }
}

uint64_t write_trace(const std::string& path) {
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  auto writer = TraceWriter::create(path, metadata);
  if (!writer) std::abort();
  ChakraProtoMsg::Node node;
  for (uint64_t id = 0; id < kNodes; ++id) {
    fill_node(id, node);
    if (!writer->write(node)) std::abort();
  }
  const uint64_t bytes = writer->bytes_written();
  if (!writer->close()) std::abort();
  return bytes;
}

void BM_WriteTrace(benchmark::State& state) {
  uint64_t bytes = 0;
  for (auto _ : state) bytes = write_trace(bench_path());
  state.SetItemsProcessed(static_cast<int64_t>(kNodes) * state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
}

void BM_StreamNodes(benchmark::State& state) {
  const uint64_t bytes = std::filesystem::file_size(bench_path());
  for (auto _ : state) {
    auto reader = TraceReader::open(bench_path());
    if (!reader) std::abort();
    ChakraProtoMsg::Node node;
    uint64_t count = 0;
    while (*reader->next(node)) ++count;
    if (count != kNodes) std::abort();
  }
  state.SetItemsProcessed(static_cast<int64_t>(kNodes) * state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
}

void BM_LoadGraph(benchmark::State& state) {
  const uint64_t bytes = std::filesystem::file_size(bench_path());
  size_t graph_bytes = 0;
  for (auto _ : state) {
    auto graph = load_trace(bench_path());
    if (!graph || graph->size() != kNodes) std::abort();
    graph_bytes = graph->memory_bytes();
  }
  state.SetItemsProcessed(static_cast<int64_t>(kNodes) * state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["graph_MB"] = static_cast<double>(graph_bytes) / 1e6;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

BENCHMARK(BM_WriteTrace)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_StreamNodes)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_LoadGraph)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace orrery::chakra

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const char* keep = std::getenv("ORRERY_BENCH_KEEP");
  if (keep == nullptr || std::string(keep) != "1")
    std::remove(orrery::chakra::bench_path().c_str());
  return 0;
}
