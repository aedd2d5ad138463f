// `orrery collective`: nccl-tests for the simulator. One collective per size on a hardware preset
// (or any ASTRA-sim system and network), printed in nccl-tests' columns, as JSON rows, or beside
// a measured nccl-tests output with the error per row (hardware/collective_bench.h).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/units.h"
#include "gen/microbench.h"
#include "hardware/collective_bench.h"
#include "hardware/nccl_tests_file.h"
#include "hardware/preset.h"
#include "network/graph_yaml.h"
#include "system/nccl_model.h"
#include "system/system_config.h"

namespace orrery::cli {

namespace {

struct CollectiveOptions {
  std::string hardware;
  uint32_t nodes = 1;
  std::string nic;
  uint32_t ranks = 0;
  std::string system;
  std::string network;
  std::string op = "all-reduce";
  std::string min_bytes = "8";
  std::string max_bytes = "";
  uint64_t factor = 2;
  std::string compare;
  std::string backend = "analytical";
  std::string timing = "astra-sim";
  bool json = false;
  bool algorithms = false;  // the nccl model's choice per size, beside nccl-tests' columns
  NcclFlags nccl;
};

// "ring LL", "nvls Simple"; "-" when the op does not run under the nccl model.
std::string choice_of(const hw::BenchRow& row) {
  if (!row.nccl) return "-";
  return fmt::format("{} {}", sys::nccl_algorithm_name(row.nccl->algorithm),
                     sys::nccl_protocol_name(row.nccl->protocol));
}

// nccl-tests' sizes: a number with K, M, G or T meaning powers of 1024; or orrery's units.
Expected<uint64_t> size_argument(const std::string& text, std::string_view flag) {
  if (!text.empty()) {
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    const std::string_view units = "KMGT";
    if (const size_t power = units.find(last); power != std::string_view::npos) {
      Expected<uint64_t> value = parse_bytes(text.substr(0, text.size() - 1));
      if (value && *value <= (uint64_t{1} << 50) >> (10 * (power + 1))) {
        return *value << (10 * (power + 1));
      }
    }
  }
  Expected<uint64_t> value = parse_bytes(text);
  if (!value) return value.error().with_context(flag);
  return value;
}

Expected<hw::BenchMachine> machine_of(const CollectiveOptions& options) {
  hw::BenchMachine machine;
  if (!options.hardware.empty()) {
    if (!options.system.empty() || !options.network.empty()) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--hardware replaces -s and -n: give one or the other");
    }
    Expected<hw::HardwarePreset> preset = hw::load_preset(options.hardware);
    if (!preset) return preset.error();
    uint32_t nodes = options.nodes;
    uint32_t per_node = 0;
    if (options.ranks != 0) {
      if (options.nodes != 1) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "--ranks and --nodes: give one (--ranks {} means {} nodes of {})",
                           options.ranks, options.ranks / std::max(preset->gpus_per_node, 1u),
                           preset->gpus_per_node);
      }
      if (options.ranks <= preset->gpus_per_node) {
        per_node = options.ranks;
      } else if (options.ranks % preset->gpus_per_node == 0) {
        nodes = options.ranks / preset->gpus_per_node;
      } else {
        return Error::make(ErrorKind::kInvalidArgument,
                           "--ranks {}: more than one node of {} GPUs must be whole nodes",
                           options.ranks, preset->gpus_per_node);
      }
    }
    Expected<hw::Hardware> built = hw::build_hardware(*preset, nodes, options.nic, per_node);
    if (!built) return built.error();
    machine.name = built->description;
    machine.system = built->system;
    machine.network = built->network;
    return machine;
  }
  if (options.system.empty() || options.network.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "give --hardware NAME_OR_FILE, or both -s (system) and -n (network)");
  }
  if (options.nodes != 1 || !options.nic.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "--nodes and --nic need --hardware");
  }
  Expected<sys::SystemConfig> system = sys::load_system_config(options.system);
  if (!system) return system.error();
  Expected<net::NetworkDescription> network = net::load_network_file(options.network);
  if (!network) return network.error();
  if (options.ranks != 0 && options.ranks != network->logical.rank_count()) {
    return Error::make(ErrorKind::kInvalidArgument, "--ranks {}: the network {} has {} ranks",
                       options.ranks, options.network, network->logical.rank_count());
  }
  machine.name = options.network;
  machine.system = std::make_shared<const sys::SystemConfig>(std::move(*system));
  machine.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  return machine;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

int run(const CollectiveOptions& options) {
  Expected<gen::MicrobenchKind> kind = gen::parse_microbench_kind(options.op);
  if (!kind) return report_error(kind.error().with_context("--op"));
  hw::BenchOptions bench;
  bench.op = *kind;
  bench.backend = options.backend;
  bench.rounding =
      options.timing == "exact" ? net::TimeRounding::kExact : net::TimeRounding::kAstraSim;
  Expected<sys::NcclOp> op = hw::bench_op(*kind);
  if (!op) return report_error(op.error());
  Expected<hw::BenchMachine> machine = machine_of(options);
  if (!machine) return report_error(machine.error());
  if (options.nccl.given()) {
    Expected<std::shared_ptr<const sys::SystemConfig>> system =
        options.nccl.restricted(*machine->system);
    if (!system) return report_error(system.error());
    machine->system = std::move(*system);
  }
  const uint32_t ranks = machine->network->logical.rank_count();

  std::vector<hw::MeasuredRow> measured;
  std::vector<uint64_t> sizes;
  if (!options.compare.empty()) {
    Expected<std::vector<hw::MeasuredRow>> rows = hw::load_nccl_tests(options.compare);
    if (!rows) return report_error(rows.error());
    measured = std::move(*rows);
    for (const hw::MeasuredRow& row : measured) sizes.push_back(row.size);
  } else {
    Expected<uint64_t> min_bytes = size_argument(options.min_bytes, "-b");
    if (!min_bytes) return report_error(min_bytes.error());
    Expected<uint64_t> max_bytes =
        options.max_bytes.empty() ? min_bytes : size_argument(options.max_bytes, "-e");
    if (!max_bytes) return report_error(max_bytes.error());
    bench.min_bytes = *min_bytes;
    bench.max_bytes = *max_bytes;
    bench.factor = options.factor;
    Expected<std::vector<uint64_t>> swept = hw::bench_sizes(bench, ranks);
    if (!swept) return report_error(swept.error());
    sizes = std::move(*swept);
  }
  Expected<std::vector<hw::BenchRow>> rows = hw::run_bench(*machine, bench, sizes);
  if (!rows) return report_error(rows.error());

  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const hw::BenchRow& row : *rows) {
      nlohmann::json entry = {
          {"size", row.size}, {"time_us", row.time_us}, {"algbw", row.algbw}, {"busbw", row.busbw}};
      if (options.algorithms && row.nccl) {
        entry["algorithm"] = sys::nccl_algorithm_name(row.nccl->algorithm);
        entry["protocol"] = sys::nccl_protocol_name(row.nccl->protocol);
      }
      out.push_back(std::move(entry));
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::string text = fmt::format("# orrery collective: {} on {} ({} ranks, {} backend)\n",
                                 options.op, machine->name, ranks, options.backend);
  if (measured.empty()) {
    text += fmt::format("#{:>12} {:>12} {:>8} {:>12} {:>8} {:>8}{}\n", "size", "count", "type",
                        "time", "algbw", "busbw", options.algorithms ? "  algorithm" : "");
    text += fmt::format("#{:>12} {:>12} {:>8} {:>12} {:>8} {:>8}\n", "(B)", "(elements)", "",
                        "(us)", "(GB/s)", "(GB/s)");
    for (const hw::BenchRow& row : *rows) {
      text += fmt::format(" {:>12} {:>12} {:>8} {:>12.2f} {:>8.2f} {:>8.2f}{}\n", row.size,
                          row.count, "float", row.time_us, row.algbw, row.busbw,
                          options.algorithms ? "  " + choice_of(row) : "");
    }
    // nccl-tests' closing figure: the mean bus bandwidth over the sizes.
    double busbw_sum = 0;
    for (const hw::BenchRow& row : *rows) busbw_sum += row.busbw;
    text += fmt::format("# Avg bus bandwidth    : {:g}\n",
                        rows->empty() ? 0.0 : busbw_sum / static_cast<double>(rows->size()));
    std::cout << text;
    return 0;
  }
  text += fmt::format("# measured: {}\n", options.compare);
  text +=
      fmt::format("#{:>12} {:>12} {:>12} {:>8} {:>8} {:>8}{}\n", "size", "measured", "simulated",
                  "error", "busbw", "busbw", options.algorithms ? "  algorithm" : "");
  text += fmt::format("#{:>12} {:>12} {:>12} {:>8} {:>8} {:>8}\n", "(B)", "(us)", "(us)", "(%)",
                      "meas.", "sim.");
  std::vector<double> all_errors;
  std::vector<double> large_errors;
  double worst_large = 0;
  const double factor = sys::nccl_bus_factor(*op, ranks);
  for (size_t idx = 0; idx < rows->size(); ++idx) {
    const hw::BenchRow& row = (*rows)[idx];
    const hw::MeasuredRow& real = measured[idx];
    const double error = (row.time_us - real.time_us) / real.time_us * 100.0;
    const double real_busbw = static_cast<double>(real.size) / (real.time_us * 1e3) * factor;
    text += fmt::format(" {:>12} {:>12.2f} {:>12.2f} {:>+8.1f} {:>8.2f} {:>8.2f}{}\n", row.size,
                        real.time_us, row.time_us, error, real_busbw, row.busbw,
                        options.algorithms ? "  " + choice_of(row) : "");
    all_errors.push_back(std::fabs(error));
    if (row.size >= (uint64_t{1} << 20)) {
      large_errors.push_back(std::fabs(error));
      worst_large = std::max(worst_large, std::fabs(error));
    }
  }
  text += fmt::format("# |error| median {:.1f}% over all {} sizes", median(all_errors),
                      all_errors.size());
  if (!large_errors.empty()) {
    text += fmt::format("; from 1 MiB up: median {:.1f}%, max {:.1f}% ({} sizes)",
                        median(large_errors), worst_large, large_errors.size());
  }
  std::cout << text << "\n";
  return 0;
}

}  // namespace

void NcclFlags::add_to(CLI::App& cmd) {
  cmd.add_option(
      "--nccl-algo", algo,
      "the algorithms the nccl collective model may pick, as NCCL_ALGO lists them: "
      "ring, tree, nvls, nvlstree, comma-separated, or ^ and those left out (e.g. ^nvls)");
  cmd.add_option("--nccl-proto", proto,
                 "the protocols it may pick, as NCCL_PROTO lists them: LL, LL128, Simple (e.g. "
                 "^LL128)");
}

Expected<std::shared_ptr<const sys::SystemConfig>> NcclFlags::restricted(
    sys::SystemConfig system) const {
  if (Status status = sys::restrict_nccl(system, algo, proto); !status) return status.error();
  return std::make_shared<const sys::SystemConfig>(std::move(system));
}

void add_collective_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<CollectiveOptions>();
  CLI::App* cmd = app.add_subcommand(
      "collective",
      "nccl-tests for the simulator: one collective per size, in nccl-tests' columns\n"
      "  e.g. orrery collective --hardware dgx-h100 --op all-reduce -b 8 -e 16G -f 2");
  cmd->add_option("--hardware", options->hardware,
                  "a hardware preset (dgx-a100, dgx-h100, hgx-h200, hgx-b200) or a preset YAML "
                  "file (docs/hardware.md)");
  cmd->add_option("--nodes", options->nodes, "--hardware: nodes (default 1)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--nic", options->nic,
                  "--hardware: NIC kind (hdr200x8, ndr400x8, roce400x8, efa100x32, tcpxo200x8; "
                  "default: the preset's)");
  cmd->add_option("--ranks", options->ranks,
                  "ranks: with --hardware, GPUs of one node (fewer than a node) or whole nodes; "
                  "with -n, must be the network's")
      ->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("-s,--system", options->system, "ASTRA-sim system JSON (instead of --hardware)");
  cmd->add_option("-n,--network", options->network,
                  "ASTRA-sim network YAML or graph topology file (instead of --hardware)");
  cmd->add_option("--op", options->op,
                  "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast or reduce");
  cmd->add_option("-b,--minbytes", options->min_bytes,
                  "smallest size (bytes; K, M, G as nccl-tests: powers of 1024)");
  cmd->add_option("-e,--maxbytes", options->max_bytes, "largest size (default: -b)");
  cmd->add_option("-f,--stepfactor", options->factor, "multiply the size by this per step (2)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  cmd->add_option("--compare", options->compare,
                  "a measured nccl-tests output (its printed table, or a table of the size in "
                  "bytes first and a header naming the time column, such as oop_time_us): "
                  "simulate its sizes and print the error per row");
  cmd->add_option("--backend", options->backend, "network backend (analytical)");
  cmd->add_option("--timing", options->timing, "astra-sim (whole ns) or exact (ps)")
      ->check(CLI::IsMember({"astra-sim", "exact"}));
  cmd->add_flag("--json", options->json,
                "rows as JSON objects with keys size, time_us, algbw, busbw");
  cmd->add_flag("--algorithms", options->algorithms,
                "also the algorithm and protocol the nccl model picks per size (a column; with "
                "--json, keys algorithm and protocol), as NCCL_DEBUG_SUBSYS=TUNING reports them");
  options->nccl.add_to(*cmd);
  cmd->callback([options, &exit_code] { exit_code = run(*options); });
}

}  // namespace orrery::cli
