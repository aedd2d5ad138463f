#include "hardware/collective_bench.h"

#include <fmt/format.h>

#include "sim/scenario.h"
#include "sim/simulation.h"

namespace orrery::hw {

Expected<sys::NcclOp> bench_op(gen::MicrobenchKind kind) {
  switch (kind) {
    case gen::MicrobenchKind::kAllReduce:
      return sys::NcclOp::kAllReduce;
    case gen::MicrobenchKind::kAllGather:
      return sys::NcclOp::kAllGather;
    case gen::MicrobenchKind::kReduceScatter:
      return sys::NcclOp::kReduceScatter;
    case gen::MicrobenchKind::kAllToAll:
      return sys::NcclOp::kAllToAll;
    case gen::MicrobenchKind::kBroadcast:
      return sys::NcclOp::kBroadcast;
    case gen::MicrobenchKind::kReduce:
      return sys::NcclOp::kReduce;
    default:
      return Error::make(ErrorKind::kInvalidArgument,
                         "--op: expected all-reduce, all-gather, reduce-scatter, all-to-all, "
                         "broadcast or reduce");
  }
}

namespace {

// nccl-tests divides a buffer evenly among ranks for these.
bool divided(sys::NcclOp op) {
  return op == sys::NcclOp::kAllGather || op == sys::NcclOp::kReduceScatter ||
         op == sys::NcclOp::kAllToAll;
}

}  // namespace

Expected<std::vector<uint64_t>> bench_sizes(const BenchOptions& options, uint32_t ranks) {
  Expected<sys::NcclOp> op = bench_op(options.op);
  if (!op) return op.error();
  if (options.min_bytes > options.max_bytes) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "-b {} is above -e {}: the sweep runs from the minimum up",
                       options.min_bytes, options.max_bytes);
  }
  if (options.min_bytes == 0) {
    // nccl-tests' loop multiplies the size: from 0 it would never reach -e.
    return Error::make(ErrorKind::kInvalidArgument, "-b 0: sizes start at 1 byte or more");
  }
  if (options.min_bytes < options.max_bytes && options.factor < 2) {
    return Error::make(ErrorKind::kInvalidArgument, "-f {}: expected a factor of at least 2",
                       options.factor);
  }
  std::vector<uint64_t> sizes;
  uint64_t size = options.min_bytes;
  while (true) {
    uint64_t rounded = size;
    if (divided(*op)) rounded -= rounded % (uint64_t{ranks} * 4);
    if (rounded > 0 && (sizes.empty() || sizes.back() != rounded)) sizes.push_back(rounded);
    if (sizes.size() > 200) {
      return Error::make(ErrorKind::kInvalidArgument, "-b {} -e {} -f {}: more than 200 sizes",
                         options.min_bytes, options.max_bytes, options.factor);
    }
    if (size >= options.max_bytes || options.factor < 2 ||
        size > options.max_bytes / options.factor)
      break;
    size *= options.factor;
  }
  if (sizes.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "-b {} -e {}: every size rounds down to 0 bytes (the op divides its "
                       "buffer over {} ranks in 4-byte floats: sizes are multiples of {} bytes)",
                       options.min_bytes, options.max_bytes, ranks, uint64_t{ranks} * 4);
  }
  return sizes;
}

Expected<std::vector<BenchRow>> run_bench(const BenchMachine& machine, const BenchOptions& options,
                                          const std::vector<uint64_t>& sizes) {
  Expected<sys::NcclOp> op = bench_op(options.op);
  if (!op) return op.error();
  const uint32_t ranks = machine.network->logical.rank_count();
  // As the collective engine decides: the op's implementations (all-reduce's for broadcast and
  // reduce) name nccl first.
  const sys::SystemConfig& system = *machine.system;
  const std::vector<sys::Algorithm>* impls = &system.all_reduce;
  if (*op == sys::NcclOp::kAllGather) impls = &system.all_gather;
  if (*op == sys::NcclOp::kReduceScatter) impls = &system.reduce_scatter;
  if (*op == sys::NcclOp::kAllToAll) impls = &system.all_to_all;
  const bool nccl = !impls->empty() && impls->front().kind == sys::AlgorithmKind::kNccl;
  std::vector<BenchRow> rows;
  rows.reserve(sizes.size());
  for (uint64_t size : sizes) {
    gen::MicrobenchSpec spec;
    spec.kind = options.op;
    spec.ranks = ranks;
    spec.bytes = *op == sys::NcclOp::kAllGather ? size / ranks : size;
    Expected<std::shared_ptr<const chakra::TraceSet>> traces =
        gen::build_microbench(spec, fmt::format("collective {} bytes", size));
    if (!traces) return traces.error();
    sim::Scenario::Inputs inputs;
    inputs.traces = std::move(*traces);
    inputs.network = machine.network;
    inputs.system = machine.system;
    inputs.network_name = machine.name;
    inputs.settings.backend = options.backend;
    inputs.settings.backend_options.rounding = options.rounding;
    inputs.settings.threads = 1;
    Expected<sim::Scenario> scenario = sim::Scenario::create(std::move(inputs));
    if (!scenario) return scenario.error().with_context(fmt::format("size {}", size));
    Expected<sim::RunResult> result = sim::simulate(*scenario);
    if (!result) return result.error().with_context(fmt::format("size {}", size));
    BenchRow row;
    row.size = size;
    row.count = size / 4;
    row.time_us = static_cast<double>(result->end.ps()) / 1e6;
    row.algbw = row.time_us > 0 ? static_cast<double>(size) / (row.time_us * 1e3) : 0;
    row.busbw = row.algbw * sys::nccl_bus_factor(*op, ranks);
    if (nccl) {
      row.nccl = sys::nccl_estimate(
          *op, size,
          sys::nccl_fabric(machine.network->logical, ranks, [](uint32_t idx) { return idx; }),
          machine.system->nccl);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace orrery::hw
