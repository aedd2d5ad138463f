// `orrery shard`: DLRM embedding sharding with TorchRec's cost model (design/shard_planner.h).
//
//   orrery shard estimate --rows R --dim D [--pooling L] [--dtype fp32] [--sharding tw|rw|cw|twrw|
//                         twcw|dp] [--kernel fused|uvm|uvm-caching] [--world-size W]
//                         [--local-world-size Lw] [--batch B] [cluster flags] [--json]
//   orrery shard plan (--model NAME|FILE.json | --tables tables.csv) --world-size W
//                     [--local-world-size Lw] [--batch B] [--sharding-types tw,rw,...]
//                     [--kernels fused,uvm-caching,uvm] [--partitioner greedy|memory-balanced|
//                     exact] [cluster flags] [-o plan.json] [--json]
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/json_config.h"
#include "core/units.h"
#include "design/shard_input.h"
#include "design/shard_planner.h"

namespace orrery::cli {

namespace {

using design::ShardCluster;
using design::ShardKernel;
using gen::ShardingType;

// The devices and network, as flags (TorchRec's defaults).
struct ClusterFlags {
  uint32_t world_size = 2;
  uint32_t local_world_size = 0;  // 0: the world size (one host), as TorchRec
  uint32_t batch = 512;
  std::string hbm = "32GiB";
  std::string ddr = "128GiB";
  double hbm_bw = 897;
  double ddr_bw = 51;
  double hbm_to_ddr_bw = 32;
  double intra_host_bw = 600;
  double inter_host_bw = 12.5;
  double cache_load_factor = 0.2;
  double reserved = 0.15;
  std::string optimizer = "none";
};

void add_cluster_flags(CLI::App* cmd, ClusterFlags& flags) {
  cmd->add_option("--world-size", flags.world_size, "Ranks (GPUs) in all (default 2)");
  cmd->add_option("--local-world-size", flags.local_world_size,
                  "Ranks per host (default: the world size, one host)");
  cmd->add_option("--batch", flags.batch, "Samples per rank per iteration (default 512)");
  cmd->add_option("--hbm", flags.hbm, "HBM per rank (default 32GiB)");
  cmd->add_option("--ddr", flags.ddr, "Host memory per rank for UVM (default 128GiB)");
  cmd->add_option("--hbm-bw", flags.hbm_bw, "HBM bandwidth, GB/s as TorchRec counts (default 897)");
  cmd->add_option("--ddr-bw", flags.ddr_bw, "DDR bandwidth, GB/s (default 51)");
  cmd->add_option("--hbm-to-ddr-bw", flags.hbm_to_ddr_bw,
                  "HBM-to-DDR (PCIe) bandwidth for UVM, GB/s (default 32)");
  cmd->add_option("--intra-host-bw", flags.intra_host_bw,
                  "Bandwidth between ranks of a host, GB/s (default 600)");
  cmd->add_option("--inter-host-bw", flags.inter_host_bw,
                  "Bandwidth per rank across hosts, GB/s (default 12.5)");
  cmd->add_option("--cache-load-factor", flags.cache_load_factor,
                  "Share of a UVM-caching table kept in HBM (default 0.2)");
  cmd->add_option("--reserved", flags.reserved,
                  "Share of HBM and DDR held back as a margin (default 0.15)");
  cmd->add_option("--optimizer", flags.optimizer,
                  "Embedding optimizer state: none (default), sgd, adam, adagrad, rowwise-adagrad");
}

Expected<ShardCluster> make_cluster(const ClusterFlags& flags) {
  ShardCluster cluster;
  cluster.world_size = flags.world_size;
  cluster.local_world_size =
      flags.local_world_size == 0 ? flags.world_size : flags.local_world_size;
  cluster.batch_size = flags.batch;
  Expected<uint64_t> hbm = parse_bytes(flags.hbm);
  if (!hbm) return hbm.error().with_context("--hbm");
  Expected<uint64_t> ddr = parse_bytes(flags.ddr);
  if (!ddr) return ddr.error().with_context("--ddr");
  cluster.hbm_bytes = *hbm;
  cluster.ddr_bytes = *ddr;
  cluster.hbm_bw = flags.hbm_bw * design::kGiBpsToBytesPerMs;
  cluster.ddr_bw = flags.ddr_bw * design::kGiBpsToBytesPerMs;
  cluster.hbm_to_ddr_bw = flags.hbm_to_ddr_bw * design::kGiBpsToBytesPerMs;
  cluster.intra_host_bw = flags.intra_host_bw * design::kGiBpsToBytesPerMs;
  cluster.inter_host_bw = flags.inter_host_bw * design::kGiBpsToBytesPerMs;
  cluster.cache_load_factor = flags.cache_load_factor;
  cluster.reserved_fraction = flags.reserved;
  Expected<design::ShardOptimizer> optimizer = design::parse_shard_optimizer(flags.optimizer);
  if (!optimizer) return optimizer.error().with_context("--optimizer");
  cluster.optimizer = *optimizer;
  if (Status status = design::validate_shard_cluster(cluster); !status) return status.error();
  return cluster;
}

std::string ms(double value) { return fmt::format("{:.6f}", value); }

std::string block_text(const design::ShardBlock& block) {
  if (block.rows == 0) return "(empty)";
  return fmt::format("rows {}-{}, cols {}-{}", format_count(block.row_offset),
                     format_count(block.row_offset + block.rows - 1), block.col_offset,
                     block.col_offset + block.cols - 1);
}

void append_perf_json(std::string& out, const design::ShardPerf& perf) {
  out +=
      fmt::format(R"("fwd_compute": {}, "fwd_comms": {}, "bwd_compute": {}, "bwd_comms": {}, )"
                  R"("total": {})",
                  perf.fwd_compute, perf.fwd_comms, perf.bwd_compute, perf.bwd_comms, perf.total());
}

std::string cluster_line(const ShardCluster& cluster) {
  return fmt::format("{} ranks ({} host{} of {}), batch {} per rank",
                     format_count(cluster.world_size), cluster.hosts(),
                     cluster.hosts() == 1 ? "" : "s", cluster.local_world_size,
                     format_count(cluster.batch_size));
}

// ---- orrery shard estimate ----------------------------------------------------------------------

struct EstimateOptions {
  uint64_t rows = 0;
  uint32_t dim = 0;
  double pooling = 1;
  std::string dtype = "fp32";
  std::string sharding = "tw";
  std::string kernel = "fused";
  ClusterFlags cluster;
  bool json = false;
};

int run_estimate(const EstimateOptions& options) {
  Expected<ShardCluster> cluster = make_cluster(options.cluster);
  if (!cluster) return report_error(cluster.error());
  if (options.rows == 0) {
    return report_error(Error(ErrorKind::kInvalidArgument, "missing --rows (rows of the table)"));
  }
  if (options.dim == 0) {
    return report_error(Error(ErrorKind::kInvalidArgument, "missing --dim (the table's columns)"));
  }
  Expected<gen::DType> dtype = gen::parse_dtype(options.dtype);
  if (!dtype) return report_error(dtype.error().with_context("--dtype"));
  const design::ShardTable table{"table", options.rows, options.dim, options.pooling, *dtype};
  if (Status status = design::validate_shard_table(table); !status) {
    return report_error(status.error());
  }
  Expected<ShardingType> type = gen::parse_sharding_type(options.sharding);
  if (!type) return report_error(type.error().with_context("--sharding"));
  Expected<ShardKernel> kernel = design::parse_shard_kernel(options.kernel);
  if (!kernel) return report_error(kernel.error().with_context("--kernel"));
  if (*type == ShardingType::kDataParallel) {
    if (*kernel == ShardKernel::kUvm || *kernel == ShardKernel::kUvmCaching) {
      return report_error(Error(ErrorKind::kInvalidArgument,
                                "--sharding dp keeps a replica in HBM on every rank: it runs "
                                "TorchRec's dense kernel, not --kernel " +
                                    options.kernel));
    }
    *kernel = ShardKernel::kDense;
  } else if (*kernel == ShardKernel::kDense) {
    return report_error(Error(ErrorKind::kInvalidArgument,
                              "--kernel dense is for --sharding dp (expected fused, uvm or "
                              "uvm-caching)"));
  }
  const design::ShardOption option = design::make_shard_option(0, table, *type, *kernel, *cluster);
  // The most expensive shard: what one rank pays (all shards of uniform types cost the same, but
  // for empty row blocks).
  size_t worst = 0;
  for (size_t index = 0; index < option.perfs.size(); ++index) {
    if (option.perfs[index].total() > option.perfs[worst].total()) worst = index;
  }
  design::ShardPerf sum;
  for (const design::ShardPerf& perf : option.perfs) sum += perf;
  const design::ShardStorage total = option.total_storage();
  if (options.json) {
    std::string out = "{";
    out += fmt::format(R"("rows": {}, "dim": {}, "pooling": {}, "dtype": "{}", "sharding": "{}", )"
                       R"("kernel": "{}", "world_size": {}, "local_world_size": {}, )"
                       R"("batch_size": {}, )",
                       table.rows, table.dim, table.pooling, gen::dtype_name(table.dtype),
                       gen::sharding_type_name(*type), design::shard_kernel_name(*kernel),
                       cluster->world_size, cluster->local_world_size, cluster->batch_size);
    append_perf_json(out, option.perfs[worst]);
    out += fmt::format(R"(, "hbm": {}, "ddr": {}, "shards": [)", option.storages[worst].hbm,
                       option.storages[worst].ddr);
    for (size_t index = 0; index < option.blocks.size(); ++index) {
      const design::ShardBlock& block = option.blocks[index];
      out += fmt::format(R"({}{{"rows": [{}, {}], "cols": [{}, {}], )", index == 0 ? "" : ", ",
                         block.row_offset, block.rows, block.col_offset, block.cols);
      append_perf_json(out, option.perfs[index]);
      out += fmt::format(R"(, "hbm": {}, "ddr": {}}})", option.storages[index].hbm,
                         option.storages[index].ddr);
    }
    out += R"(], "sum": {)";
    append_perf_json(out, sum);
    out += fmt::format(R"(, "hbm": {}, "ddr": {}}}}})", total.hbm, total.ddr);
    fmt::print("{}\n", out);
    return 0;
  }
  fmt::print("table {} x {} {}, pooling {}; {} sharding, {} kernel; {}\n", format_count(table.rows),
             table.dim, gen::dtype_name(table.dtype), table.pooling, gen::sharding_type_name(*type),
             design::shard_kernel_name(*kernel), cluster_line(*cluster));
  fmt::print("{:<10} {:<34} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "shard", "block",
             "fwd_compute", "fwd_comms", "bwd_compute", "bwd_comms", "total ms", "HBM", "DDR");
  // Consecutive shards alike in every figure print once.
  for (size_t first = 0; first < option.blocks.size();) {
    size_t last = first;
    auto same = [&](size_t a, size_t b) {
      return option.blocks[a].rows == option.blocks[b].rows &&
             option.blocks[a].cols == option.blocks[b].cols &&
             option.storages[a].hbm == option.storages[b].hbm &&
             option.storages[a].ddr == option.storages[b].ddr &&
             option.perfs[a].total() == option.perfs[b].total();
    };
    while (last + 1 < option.blocks.size() && same(first, last + 1)) ++last;
    const design::ShardPerf& perf = option.perfs[first];
    const std::string name =
        first == last ? fmt::format("{}", first) : fmt::format("{}-{} each", first, last);
    fmt::print("{:<10} {:<34} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", name,
               first == last
                   ? block_text(option.blocks[first])
                   : fmt::format("{} rows x {} cols", format_count(option.blocks[first].rows),
                                 option.blocks[first].cols),
               ms(perf.fwd_compute), ms(perf.fwd_comms), ms(perf.bwd_compute), ms(perf.bwd_comms),
               ms(perf.total()), format_bytes(option.storages[first].hbm),
               format_bytes(option.storages[first].ddr));
    first = last + 1;
  }
  if (option.blocks.size() > 1) {
    fmt::print("{:<10} {:<34} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "all",
               fmt::format("{} shards", option.blocks.size()), ms(sum.fwd_compute),
               ms(sum.fwd_comms), ms(sum.bwd_compute), ms(sum.bwd_comms), ms(sum.total()),
               format_bytes(total.hbm), format_bytes(total.ddr));
  }
  return 0;
}

// ---- orrery shard plan --------------------------------------------------------------------------

struct PlanOptions {
  std::string model;
  std::string tables;
  std::string dtype;
  ClusterFlags cluster;
  std::vector<std::string> types;
  std::vector<std::string> kernels;
  std::string partitioner = "greedy";
  double time_limit = 60;
  int64_t search_budget = -1;
  std::string output;
  bool json = false;
  size_t show_tables = 30;
};

Expected<design::ShardProblem> load_problem(const PlanOptions& options,
                                            const ShardCluster& cluster) {
  if (options.model.empty() == options.tables.empty()) {
    return Error(ErrorKind::kInvalidArgument,
                 "give the tables with --model NAME|FILE.json (orrery gen dlrm's presets and "
                 "model files) or --tables tables.csv, one of them");
  }
  gen::DType dtype = gen::DType::kFp32;
  if (!options.dtype.empty()) {
    Expected<gen::DType> parsed = gen::parse_dtype(options.dtype);
    if (!parsed) return parsed.error().with_context("--dtype");
    dtype = *parsed;
  }
  design::ShardTables tables;
  if (!options.model.empty()) {
    Expected<gen::DlrmModel> model = gen::resolve_dlrm_model(options.model);
    if (!model) return model.error().with_context("--model");
    if (!options.dtype.empty()) model->dtype = dtype;
    tables = design::tables_from_dlrm(*model, options.model);
  } else {
    Expected<design::ShardTables> loaded = design::load_tables_csv(options.tables, dtype);
    if (!loaded) return loaded.error();
    tables = std::move(*loaded);
  }
  design::ShardProblem problem;
  problem.tables = std::move(tables.tables);
  problem.dense_parameter_bytes = tables.dense_parameter_bytes;
  problem.model = tables.source;
  problem.cluster = cluster;
  return problem;
}

std::string plan_json(const design::ShardProblem& problem, const design::ShardPlan& plan) {
  std::string out = "{";
  out += fmt::format(R"("rating": {}, "lower_bound": {}, "imbalance": {}, "proposal": )",
                     plan.rating(), plan.lower_bound(), plan.rating() / plan.lower_bound());
  append_json_string(out, plan.proposal);
  out += R"(, "partitioner": )";
  append_json_string(out, plan.partitioner);
  out += fmt::format(R"(, "proven_optimal": {}, "world_size": {}, "tables": {}, )"
                     R"("capacity": {{"hbm": {}, "ddr": {}}}, "ranks": [)",
                     plan.proven_optimal, problem.cluster.world_size, problem.tables.size(),
                     plan.capacity.hbm, plan.capacity.ddr);
  for (size_t rank = 0; rank < plan.rank_perf.size(); ++rank) {
    out += fmt::format("{}{{", rank == 0 ? "" : ", ");
    append_perf_json(out, plan.rank_perf[rank]);
    out += fmt::format(R"(, "hbm": {}, "ddr": {}}})", plan.rank_storage[rank].hbm,
                       plan.rank_storage[rank].ddr);
  }
  out += "]}";
  return out;
}

int run_plan(const PlanOptions& options) {
  Expected<ShardCluster> cluster = make_cluster(options.cluster);
  if (!cluster) return report_error(cluster.error());
  Expected<design::ShardProblem> problem = load_problem(options, *cluster);
  if (!problem) return report_error(problem.error());
  design::ShardPlannerOptions planner;
  if (!options.types.empty()) {
    planner.types.clear();
    for (const std::string& name : options.types) {
      Expected<ShardingType> type = gen::parse_sharding_type(name);
      if (!type) return report_error(type.error().with_context("--sharding-types"));
      if (std::find(planner.types.begin(), planner.types.end(), *type) == planner.types.end()) {
        planner.types.push_back(*type);
      }
    }
  }
  if (!options.kernels.empty()) {
    planner.kernels.clear();
    for (const std::string& name : options.kernels) {
      Expected<ShardKernel> kernel = design::parse_shard_kernel(name);
      if (!kernel) return report_error(kernel.error().with_context("--kernels"));
      if (*kernel == ShardKernel::kDense) {
        return report_error(Error(ErrorKind::kInvalidArgument,
                                  "--kernels: dense is the kernel of dp tables, always allowed "
                                  "with them (expected fused, uvm, uvm-caching)"));
      }
      planner.kernels.push_back(*kernel);
    }
  }
  Expected<design::ShardPartitioner> partitioner =
      design::parse_shard_partitioner(options.partitioner);
  if (!partitioner) return report_error(partitioner.error().with_context("--partitioner"));
  planner.partitioner = *partitioner;
  planner.exact_time_limit_s = options.time_limit;
  if (options.search_budget >= 0)
    planner.search_budget = static_cast<size_t>(options.search_budget);
  Expected<design::ShardPlan> plan = design::plan_shards(*problem, planner);
  if (!plan) return report_error(plan.error());
  if (!options.output.empty()) {
    if (Status status =
            gen::write_dlrm_shard_plan(design::to_shard_plan_file(*problem, *plan), options.output);
        !status) {
      return report_error(status.error());
    }
  }
  if (options.json) {
    fmt::print("{}\n", plan_json(*problem, *plan));
    return 0;
  }
  const ShardCluster& c = *cluster;
  uint64_t rows = 0;
  for (const design::ShardTable& table : problem->tables) rows += table.rows;
  fmt::print("tables: {} from {} ({} rows)\n", format_count(problem->tables.size()), problem->model,
             format_count(rows));
  fmt::print(
      "cluster: {}; {} HBM and {} DDR per rank, {} HBM and {} DDR for tables after "
      "reservations\n",
      cluster_line(c), format_bytes(c.hbm_bytes), format_bytes(c.ddr_bytes),
      format_bytes(plan->capacity.hbm), format_bytes(plan->capacity.ddr));
  fmt::print("plan: {} partitioner, {}{}\n", plan->partitioner, plan->proposal,
             plan->partitioner == "exact"
                 ? (plan->proven_optimal ? " (proven optimal)" : " (not proven optimal)")
                 : "");
  // The mix: tables per (type, kernel), in the enumeration order.
  std::vector<std::pair<std::string, size_t>> mix;
  for (const design::PlacedTable& placed : plan->tables) {
    const std::string key = fmt::format("{} {}", gen::sharding_type_name(placed.option.type),
                                        design::shard_kernel_name(placed.option.kernel));
    auto found =
        std::find_if(mix.begin(), mix.end(), [&](const auto& e) { return e.first == key; });
    if (found == mix.end()) {
      mix.push_back({key, 1});
    } else {
      ++found->second;
    }
  }
  std::string mix_text;
  for (const auto& [key, count] : mix) {
    mix_text += fmt::format("{}{} x {}", mix_text.empty() ? "" : ", ", format_count(count), key);
  }
  fmt::print("mix: {}\n", mix_text);
  double total = 0;
  double largest = 0;
  for (const design::PlacedTable& placed : plan->tables) {
    for (const design::ShardPerf& perf : placed.option.perfs) {
      total += perf.total();
      largest = std::max(largest, perf.total());
    }
  }
  fmt::print(
      "estimate: {:.4f} ms per iteration (the busiest rank); lower bound {:.4f} ms "
      "(total work / ranks {:.4f} ms, largest shard {:.4f} ms): imbalance {:.3f}\n",
      plan->rating(), plan->lower_bound(), total / c.world_size, largest,
      plan->rating() / plan->lower_bound());
  // Tables.
  const size_t shown = std::min(options.show_tables, plan->tables.size());
  fmt::print("{:<16} {:>14} {:>5} {:>8} {:>5} {:<12} {:>6} {:>10} {:<24}\n", "table", "rows", "dim",
             "pooling", "type", "kernel", "shards", "total ms", "ranks");
  for (size_t t = 0; t < shown; ++t) {
    const design::PlacedTable& placed = plan->tables[t];
    const design::ShardTable& table = problem->tables[t];
    std::string ranks;
    const bool uniform = placed.option.type == ShardingType::kRowWise ||
                         placed.option.type == ShardingType::kDataParallel;
    if (uniform) {
      ranks = "all";
    } else if (placed.option.type == ShardingType::kTableRowWise) {
      ranks = fmt::format("host {}", placed.ranks[0] / c.local_world_size);
    } else {
      for (uint32_t rank : placed.ranks)
        ranks += fmt::format("{}{}", ranks.empty() ? "" : ",", rank);
    }
    fmt::print("{:<16} {:>14} {:>5} {:>8} {:>5} {:<12} {:>6} {:>10.4f} {:<24}\n", table.name,
               format_count(table.rows), table.dim, table.pooling,
               gen::sharding_type_name(placed.option.type),
               design::shard_kernel_name(placed.option.kernel), placed.option.blocks.size(),
               placed.option.total_perf(), ranks);
  }
  if (shown < plan->tables.size()) {
    fmt::print("... {} more tables (--show-tables N; -o plan.json has every shard)\n",
               format_count(plan->tables.size() - shown));
  }
  // Ranks (the busiest 16 when there are many).
  std::vector<size_t> order(c.world_size);
  for (size_t rank = 0; rank < order.size(); ++rank) order[rank] = rank;
  const bool all = c.world_size <= 32;
  if (!all) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return plan->rank_perf[a].total() > plan->rank_perf[b].total();
    });
    order.resize(16);
  }
  fmt::print("{:<6} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}{}\n", "rank", "fwd_compute",
             "fwd_comms", "bwd_compute", "bwd_comms", "total ms", "HBM", "DDR",
             all ? "" : "   (the 16 busiest ranks)");
  for (size_t rank : order) {
    const design::ShardPerf& perf = plan->rank_perf[rank];
    fmt::print("{:<6} {:>12.4f} {:>12.4f} {:>12.4f} {:>12.4f} {:>12.4f} {:>12} {:>12}\n", rank,
               perf.fwd_compute, perf.fwd_comms, perf.bwd_compute, perf.bwd_comms, perf.total(),
               format_bytes(plan->rank_storage[rank].hbm),
               format_bytes(plan->rank_storage[rank].ddr));
  }
  if (!options.output.empty()) fmt::print("wrote {}\n", options.output);
  return 0;
}

}  // namespace

void add_shard_command(CLI::App& app, int& exit_code) {
  CLI::App* shard = app.add_subcommand(
      "shard",
      "Shard DLRM embedding tables over GPUs with TorchRec's cost model: estimate one option, or "
      "plan every table");
  shard->require_subcommand(1);

  auto estimate = std::make_shared<EstimateOptions>();
  CLI::App* est = shard->add_subcommand(
      "estimate",
      "What one table costs under one sharding: per-shard forward and backward compute and "
      "communication (ms) and storage (bytes)\n  e.g. orrery shard estimate --rows 100 --dim 10 "
      "--sharding rw --kernel fused --world-size 2 --json");
  est->add_option("--rows", estimate->rows, "Rows of the table")->required();
  est->add_option("--dim", estimate->dim, "Columns (embedding dimension)")->required();
  est->add_option("--pooling", estimate->pooling, "Lookups per sample (default 1)");
  est->add_option("--dtype", estimate->dtype, "fp32 (default), bf16, fp16 or fp8");
  est->add_option("--sharding", estimate->sharding, "tw (default), rw, cw, twrw, twcw or dp");
  est->add_option("--kernel", estimate->kernel,
                  "fused (HBM, default), uvm or uvm-caching (dp: always TorchRec's dense)");
  add_cluster_flags(est, estimate->cluster);
  est->add_flag("--json", estimate->json, "Print one JSON object");
  est->callback([estimate, &exit_code] { exit_code = run_estimate(*estimate); });

  auto plan = std::make_shared<PlanOptions>();
  CLI::App* pl = shard->add_subcommand(
      "plan",
      "Place every table's shards on ranks to balance time under memory limits (TorchRec's "
      "planner; greedy, memory-balanced, or the exact optimum)\n  e.g. orrery shard plan --model "
      "dlrm-mlperf --world-size 16 --local-world-size 8 -o plan.json");
  pl->add_option("--model", plan->model,
                 "Tables of a DLRM preset or model file (orrery gen dlrm --list-models)");
  pl->add_option(
      "--tables", plan->tables,
      "Tables from a CSV: a header naming rows, dim and optionally name, pooling, dtype");
  pl->add_option("--dtype", plan->dtype, "Data type of tables that do not give one");
  add_cluster_flags(pl, plan->cluster);
  pl->add_option("--sharding-types", plan->types,
                 "Allowed sharding types, comma-separated (default tw,rw,cw,twrw,twcw,dp)")
      ->delimiter(',');
  pl->add_option("--kernels", plan->kernels,
                 "Allowed kernels, comma-separated (default fused,uvm-caching,uvm)")
      ->delimiter(',');
  pl->add_option("--partitioner", plan->partitioner,
                 "greedy (default), memory-balanced or exact (GLPK; small instances)");
  pl->add_option("--time-limit", plan->time_limit, "Seconds for the exact partitioner (default 60)")
      ->check(finite_number(0.001, 1e6));
  pl->add_option("--search-budget", plan->search_budget,
                 "Re-partitions the local search may try (default 40,000 / tables, 16 to 2,000)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000'000}));
  pl->add_option("--show-tables", plan->show_tables, "Tables listed (default 30)");
  pl->add_option("-o,--output", plan->output, "Write the plan (every shard) as JSON");
  pl->add_flag("--json", plan->json, "Print the summary (rating, bound, per rank) as JSON");
  pl->callback([plan, &exit_code] { exit_code = run_plan(*plan); });
}

}  // namespace orrery::cli
