#include "partition/inference_trace.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gen/rank_program.h"
#include "sim/simulation.h"

namespace orrery::partition {

Expected<std::vector<std::string>> write_inference_traces(const Partition& partition,
                                                          const std::string& prefix,
                                                          const TraceOptions& options) {
  const int32_t workers = partition.options.workers;
  const auto batch = static_cast<uint64_t>(options.batch);
  const auto value_bytes = static_cast<uint64_t>(options.bytes_per_value);
  if (options.batch < 1 || options.bytes_per_value < 1) {
    return Error::make(ErrorKind::kInvalidArgument, "batch and bytes per value must be >= 1");
  }
  const auto gather_tag = static_cast<int32_t>(partition.layers.size() + 1);
  gen::ProgramBuilder build = [&](uint32_t rank) -> Expected<gen::RankProgram> {
    const auto k = static_cast<int32_t>(rank);
    gen::RankProgram program;
    gen::ProgRef produced = gen::kNoNode;  // this worker's last compute
    for (size_t l = 0; l < partition.layers.size(); ++l) {
      const LayerPlan& plan = partition.layers[l];
      const Layer& layer = partition.model.layers[plan.layer];
      const auto tag = static_cast<int32_t>(l + 1);
      const std::string name = layer.name.empty() ? fmt::format("layer{}", l + 1) : layer.name;
      for (int32_t b = 0; b < workers; ++b) {
        const auto values = static_cast<uint64_t>(std::llround(plan.traffic(k, b)));
        if (b == k || values == 0) continue;
        program.send(fmt::format("{}: activations to {}", name, b), static_cast<uint32_t>(b), tag,
                     values * value_bytes * batch, {produced});
      }
      std::vector<gen::ProgRef> received;
      for (int32_t a = 0; a < workers; ++a) {
        const auto values = static_cast<uint64_t>(std::llround(plan.traffic(a, k)));
        if (a == k || values == 0) continue;
        received.push_back(program.recv(fmt::format("{}: activations from {}", name, a),
                                        static_cast<uint32_t>(a), tag,
                                        values * value_bytes * batch));
      }
      const auto macs = static_cast<uint64_t>(plan.macs[static_cast<size_t>(k)]);
      const auto local = static_cast<uint64_t>(plan.local_macs[static_cast<size_t>(k)]);
      const uint64_t units =
          static_cast<uint64_t>(std::count(plan.placement.begin(), plan.placement.end(), k));
      if (macs == 0 && units == 0) continue;
      // Bytes touched (the roofline's memory side): the weights used once, and per inference the
      // layer's input and this worker's outputs.
      const auto positions = static_cast<uint64_t>(std::max<int64_t>(layer.out.positions(), 1));
      const uint64_t outputs = units * positions;
      const auto inputs = static_cast<uint64_t>(layer.in.features());
      auto bytes_of = [&](uint64_t part_macs) {
        return (part_macs / positions + (inputs + outputs) * batch) * value_bytes;
      };
      gen::ProgRef last = program.compute(fmt::format("{}: local inputs", name),
                                          {2 * local * batch, bytes_of(local)}, {produced});
      if (macs > local) {
        gen::ProgRef remote =
            program.compute(fmt::format("{}: received inputs", name),
                            {2 * (macs - local) * batch, bytes_of(macs - local)}, {last});
        program.depend(remote, received);
        last = remote;
      } else {
        program.depend(last, received);
      }
      produced = last;
    }
    const auto values = static_cast<uint64_t>(partition.gather[static_cast<size_t>(k)]);
    if (k != 0 && values > 0) {
      program.send("outputs to 0", 0, gather_tag, values * value_bytes * batch, {produced});
    }
    if (k == 0) {
      for (int32_t a = 1; a < workers; ++a) {
        const auto from = static_cast<uint64_t>(partition.gather[static_cast<size_t>(a)]);
        if (from == 0) continue;
        program.recv(fmt::format("outputs from {}", a), static_cast<uint32_t>(a), gather_tag,
                     from * value_bytes * batch);
      }
    }
    return program;
  };
  gen::RankFileOptions files;
  files.generator = options.generator;
  files.threads = 1;
  Expected<gen::RankFiles> written =
      gen::write_rank_files(static_cast<uint32_t>(workers), prefix, files, build);
  if (!written) return written.error();
  return written->paths;
}

Expected<int64_t> simulate_latency(const std::string& prefix, const std::string& system,
                                   const std::string& network) {
  sim::RunConfig config;
  config.workload = prefix;
  config.system = system;
  config.network = network;
  config.threads = 1;
  config.mode = chakra::ValidationMode::kStrict;
  Expected<sim::RunResult> result = sim::run_simulation(config, [](const std::string&) {});
  if (!result) return result.error();
  return static_cast<int64_t>(std::llround(result->end.ns()));
}

}  // namespace orrery::partition
