// `orrery libra`: the optimal bandwidth of each network dimension (LIBRA).
//
//   orrery libra [PROBLEM.yml|.json] [--network 3d_network.yml --workload GPT_3.txt
//                --communicator GPT_3_3d.yml --cost-model 3d_cost_model.yml]
//                [--constraint "sum = 500"]... [--objective PerfOpt|PerfPerCost|PerfOptBudget]
//                [--budget $] [--given 100,200,200] [--output result.json]
//                [--trace PREFIX [-g groups.json] | --llm-plan '<orrery gen llm options>']
//                [--system system.json] [--rank R]
//                [--pareto frontier.svg] [--pareto-html frontier.html] [--pareto-points N]
//                [--simulate [DIR]]
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/text_file.h"
#include "design/libra_input.h"
#include "design/libra_report.h"
#include "design/libra_simulation.h"
#include "design/libra_solver.h"
#include "design/libra_workload.h"

namespace orrery::cli {

namespace {

struct LibraOptions {
  std::string problem;
  std::string network;
  std::string workload;
  std::string communicator;
  std::string cost_model;
  std::vector<std::string> constraints;
  std::string objective;
  double budget = 0;
  std::vector<double> given;
  std::string output;
  std::string pareto;
  std::string pareto_html;
  int pareto_points = 16;
  bool simulate = false;
  std::string simulate_dir;  // where --simulate DIR keeps the simulated inputs ("" = nowhere)
  // A workload derived from a trace set or an `orrery gen llm` plan (design/libra_workload.h).
  std::string trace;
  std::string comm_groups;
  std::string llm_plan;
  std::string system;
  int64_t rank = -1;  // -1: not given
};

// The problem the files and flags describe. `derived` gets the derived workload's summary line.
Expected<design::Problem> assemble(const LibraOptions& options, std::string& derived) {
  design::Problem problem;
  if (!options.problem.empty()) {
    Expected<design::Problem> loaded = design::load_problem(options.problem);
    if (!loaded) return loaded.error();
    problem = std::move(*loaded);
  }
  if (!options.network.empty()) {
    auto dims = design::load_libra_network(options.network);
    if (!dims) return dims.error();
    problem.dimensions = std::move(*dims);
  }
  if (!options.workload.empty()) {
    auto layers = design::load_libra_workload(options.workload);
    if (!layers) return layers.error();
    problem.layers = std::move(*layers);
    const size_t slash = options.workload.find_last_of('/');
    std::string name = options.workload.substr(slash == std::string::npos ? 0 : slash + 1);
    problem.workload_name = name.substr(0, name.find_last_of('.'));
  }
  if (!options.communicator.empty()) {
    auto groups = design::load_libra_communicator(options.communicator);
    if (!groups) return groups.error();
    for (const auto& g : *groups) {
      if (g.size() != problem.dimensions.size()) {
        return Error::make(ErrorKind::kConfig,
                           "{}: {} group sizes per phase for a {}-dimensional network",
                           options.communicator, g.size(), problem.dimensions.size());
      }
    }
    for (design::Layer& layer : problem.layers) {
      for (design::Phase& phase : layer.phases) phase.groups.clear();
    }
    design::apply_communicator(*groups, problem.layers);
  }
  const bool derived_flags =
      !options.comm_groups.empty() || !options.system.empty() || options.rank >= 0;
  if (!options.trace.empty() || !options.llm_plan.empty()) {
    design::WorkloadSource source;
    if (!options.trace.empty()) {
      source.trace = options.trace;
      source.where = "--trace " + options.trace;
      problem.workload_name = std::filesystem::path(options.trace).filename().string();
    } else {
      auto llm = design::parse_llm_plan_text(options.llm_plan);
      if (!llm) return llm.error().with_context("--llm-plan");
      source.llm = std::move(*llm);
      source.where = "--llm-plan";
      problem.workload_name = "llm plan";
    }
    if (problem.workload_source) {
      // The problem file's system and rank still apply to the source given on the command line.
      source.system = problem.workload_source->system;
      source.rank = problem.workload_source->rank;
    }
    problem.layers.clear();
    problem.workload_source = std::move(source);
  } else if (!options.workload.empty()) {
    problem.workload_source.reset();
  }
  if (problem.workload_source) {
    design::WorkloadSource& source = *problem.workload_source;
    if (!options.communicator.empty()) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--communicator gives LIBRA layers their groups; the derived workload "
                         "({}) takes its groups from the trace or plan",
                         source.where);
    }
    if (!options.comm_groups.empty()) {
      if (source.trace.empty()) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "--comm-groups belongs to a trace (--trace); a plan has its own groups");
      }
      source.groups = options.comm_groups;
    }
    if (!options.system.empty()) source.system = options.system;
    if (options.rank >= 0) source.rank = static_cast<uint32_t>(options.rank);
    if (problem.dimensions.empty()) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "no network: a derived workload needs the network (--network or a "
                         "problem file) to place its groups");
    }
    Expected<design::DerivedWorkload> derived_workload =
        design::derive_workload(source, problem.dimensions);
    if (!derived_workload) return derived_workload.error();
    problem.layers = std::move(derived_workload->layers);
    derived = derived_workload->summary();
    fmt::print("workload     {}\n", derived);
  } else if (derived_flags) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--comm-groups, --system and --rank apply to a workload derived from a "
                       "trace (--trace) or a plan (--llm-plan)");
  }
  if (!options.cost_model.empty()) {
    auto cost = design::load_libra_cost_model(options.cost_model);
    if (!cost) return cost.error();
    problem.cost_model = std::move(*cost);
  }
  if (problem.dimensions.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "no network: give a problem file or --network (LIBRA's network YAML)");
  }
  if (problem.layers.empty()) {
    return Error::make(
        ErrorKind::kInvalidArgument,
        "no workload: give a problem file, --workload (LIBRA's workload text), --trace or "
        "--llm-plan");
  }
  if (!options.constraints.empty()) {
    problem.constraints.clear();
    for (const std::string& text : options.constraints) {
      auto c = design::parse_constraint(text, problem.dimensions.size());
      if (!c) return c.error().with_context("--constraint");
      problem.constraints.push_back(std::move(*c));
    }
  }
  if (!options.objective.empty()) {
    auto objective = design::parse_objective(options.objective);
    if (!objective) return objective.error().with_context("--objective");
    problem.objective = *objective;
  }
  if (options.budget > 0) {
    problem.budget = options.budget;
    if (options.objective.empty()) problem.objective = design::Objective::kPerfOptBudget;
  }
  if (!options.given.empty()) problem.baseline = options.given;
  return problem;
}

int run_libra(const LibraOptions& options) {
  std::string derived;
  Expected<design::Problem> problem = assemble(options, derived);
  if (!problem) return report_error(problem.error());
  Expected<design::TrafficModel> model = design::build_traffic_model(*problem);
  if (!model) return report_error(model.error());
  Expected<design::Solution> solution = design::solve(*problem);
  if (!solution) return report_error(solution.error());
  fmt::print("{}", design::format_libra_table(*problem, *model, *solution));

  nlohmann::json simulated;
  if (options.simulate) {
    // The same allocations in the simulator: the model's ranking must hold there too.
    Expected<design::LibraWorkload> workload =
        design::build_libra_workload(*problem, 16, options.simulate_dir);
    if (!workload) return report_error(workload.error().with_context("--simulate"));
    std::vector<std::pair<std::string, const design::Allocation*>> runs;
    if (solution->has_equal) runs.emplace_back("equal", &solution->equal);
    if (solution->has_baseline) runs.emplace_back("given", &solution->baseline);
    runs.emplace_back("optimum", &solution->optimum);
    double optimum_ns = 0;
    std::vector<std::pair<std::string, double>> times;
    for (const auto& [name, allocation] : runs) {
      Expected<double> ns = design::simulate_allocation(*problem, *workload, allocation->bandwidth);
      if (!ns) return report_error(ns.error().with_context("--simulate"));
      if (!options.simulate_dir.empty()) {
        const std::string path = options.simulate_dir + "/" + name + ".yml";
        if (Status written = write_text_file(
                path, design::libra_network_yaml(*problem, *workload, allocation->bandwidth));
            !written) {
          return report_error(written.error());
        }
      }
      times.emplace_back(name, *ns);
      if (name == "optimum") optimum_ns = *ns;
    }
    for (const auto& [name, ns] : times) {
      const design::Allocation& allocation =
          name == "equal" ? solution->equal
                          : (name == "given" ? solution->baseline : solution->optimum);
      fmt::print("simulated    {:<8} {:.4f} ms (model {:.4f} ms), optimum {:.4f}x faster\n", name,
                 ns / 1e6, allocation.time_ns / 1e6, ns / optimum_ns);
      simulated[name] = {{"simulated_ns", ns}, {"model_ns", allocation.time_ns}};
    }
    if (options.simulate_dir.empty()) {
      fmt::print("simulated    {} ranks\n", workload->ranks);
    } else {
      fmt::print("simulated    {} ranks, inputs in {}\n", workload->ranks, options.simulate_dir);
    }
  }

  std::vector<design::FrontierPoint> frontier = solution->frontier;
  if (!options.pareto.empty() || !options.pareto_html.empty()) {
    if (frontier.empty() || static_cast<int>(frontier.size()) != options.pareto_points) {
      Expected<std::vector<design::FrontierPoint>> swept =
          design::sweep_frontier(*problem, options.pareto_points);
      if (!swept) return report_error(swept.error().with_context("--pareto"));
      frontier = std::move(*swept);
    }
    if (!options.pareto.empty()) {
      if (Status s =
              write_text_file(options.pareto, design::frontier_svg(*problem, *solution, frontier));
          !s) {
        return report_error(s.error());
      }
      fmt::print("wrote {} ({} budgets)\n", options.pareto, frontier.size());
    }
    if (!options.pareto_html.empty()) {
      if (Status s = write_text_file(options.pareto_html,
                                     design::frontier_html(*problem, *solution, frontier));
          !s) {
        return report_error(s.error());
      }
      fmt::print("wrote {} ({} budgets)\n", options.pareto_html, frontier.size());
    }
  }
  if (!options.output.empty()) {
    nlohmann::json json = design::libra_json(*problem, *model, *solution);
    if (!simulated.is_null()) json["simulated"] = simulated;
    if (!derived.empty()) json["derived_workload"] = derived;
    if (!frontier.empty()) {
      nlohmann::json points = nlohmann::json::array();
      for (const design::FrontierPoint& p : frontier) {
        points.push_back({{"budget", p.budget},
                          {"cost", p.allocation.cost},
                          {"time_ns", p.allocation.time_ns},
                          {"bandwidth_gbps", p.allocation.bandwidth},
                          {"gap", p.gap}});
      }
      json["frontier"] = points;
    }
    if (Status s = write_text_file(options.output, json.dump(2) + "\n"); !s) {
      return report_error(s.error());
    }
    fmt::print("wrote {}\n", options.output);
  }
  return 0;
}

}  // namespace

void add_libra_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<LibraOptions>();
  CLI::App* cmd = app.add_subcommand(
      "libra",
      "Find the bandwidth of each network dimension that minimises the iteration time of a\n"
      "workload (LIBRA), under linear constraints on the bandwidths, optionally within a cost\n"
      "budget or minimising time x cost. Reads LIBRA's own files unchanged, or a problem file\n"
      "(YAML/JSON); the workload can also be derived from a Chakra trace set (--trace) or an\n"
      "orrery gen llm plan (--llm-plan). Prints a table per dimension with the speedup over the\n"
      "equal split and a given network, and certifies the optimum (a lower bound and the gap).\n"
      "See docs/models/libra.md\n"
      "  e.g. orrery libra --network 3d_network.yml --workload GPT_3.txt \\\n"
      "         --communicator GPT_3_3d.yml --cost-model 3d_cost_model.yml \\\n"
      "         --constraint 'sum = 500' --pareto frontier.svg -o result.json");
  cmd->add_option("problem", options->problem,
                  "problem file (YAML or JSON): network, workload, communicator, cost_model,\n"
                  "constraints, objective, budget, baseline; flags below override it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--network", options->network,
                  "LIBRA network YAML (Topology, NpusCount, CostDimension)")
      ->check(CLI::ExistingFile);
  CLI::Option* workload = cmd->add_option("--workload", options->workload,
                                          "LIBRA workload text (ASTRA-sim 1.0 layer lines)")
                              ->check(CLI::ExistingFile);
  CLI::Option* trace = cmd->add_option(
      "--trace", options->trace,
      "derive the workload from a Chakra trace set (<prefix>.<rank>.et, one rank\n"
      "per NPU of the network): the chosen rank's GPU compute and each collective's\n"
      "bytes and group sizes per dimension (groups must be sub-grids of the network)");
  CLI::Option* llm_plan = cmd->add_option(
      "--llm-plan", options->llm_plan,
      "derive the workload from an orrery gen llm plan, built in memory: its options in\n"
      "quotes, e.g. --llm-plan '--model gpt3-175b --global-batch 64 --tp 8 --dp 4 --pp 2'");
  cmd->add_option("-g,--comm-groups", options->comm_groups,
                  "communicator groups of --trace (default: <prefix>.json when it exists)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--system", options->system,
                  "system JSON whose roofline (roofline-enabled, peak-perf, local-mem-bw) times\n"
                  "compute nodes of --trace / --llm-plan; without it, duration_micros")
      ->check(CLI::ExistingFile);
  cmd->add_option("--rank", options->rank,
                  "the rank whose trace stands for the iteration (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  trace->excludes(llm_plan);
  workload->excludes(trace)->excludes(llm_plan);
  CLI::Option* communicator =
      cmd->add_option("--communicator", options->communicator,
                      "LIBRA communicator YAML (Forward, InputGrad, WeightGrad group sizes)")
          ->check(CLI::ExistingFile);
  communicator->excludes(trace)->excludes(llm_plan);
  cmd->add_option("--cost-model", options->cost_model,
                  "LIBRA cost model YAML ($ per GB/s for Link, Switch, Nic)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-c,--constraint", options->constraints,
                  "linear constraint on bandwidths B0..B{D-1} in GB/s, repeatable:\n"
                  "'sum = 500', 'B0 >= B1', 'B2 + B3 = 200', 'B0 <= 300'");
  cmd->add_option("--objective", options->objective,
                  "PerfOpt (default), PerfPerCost (time x cost), PerfOptBudget (with --budget)");
  cmd->add_option("--budget", options->budget, "network cost budget in $ (implies PerfOptBudget)")
      ->check(finite_number(1e-9, design::kMaxLibraNumber));
  cmd->add_option("--given", options->given,
                  "a given network's bandwidths to compare with, e.g. --given 250,150,100 (each "
                  "0.001 to 1e9 GB/s)")
      ->check(finite_number(kMinGbps, kMaxGbps))
      ->delimiter(',');
  cmd->add_option("-o,--output", options->output, "write the result as JSON");
  cmd->add_option("--pareto", options->pareto,
                  "write the time-versus-cost frontier over a budget sweep as SVG");
  cmd->add_option("--pareto-html", options->pareto_html,
                  "write the same frontier as a self-contained HTML page (chart and table)");
  cmd->add_option("--pareto-points", options->pareto_points, "budgets in the sweep")
      ->default_val(options->pareto_points)
      ->check(CLI::Range(2, 400));
  cmd->add_option_function<std::string>(
         "--simulate",
         [options](const std::string& dir) {
           options->simulate = true;
           options->simulate_dir = dir;
         },
         "also run the equal split, the given network and the optimum in the simulator, in\n"
         "memory (a dimension that groups use in part is simulated as sub-dimensions, each with\n"
         "its bandwidth); with DIR, also write the traces, groups, system and networks there\n"
         "for orrery run")
      ->expected(0, 1)
      ->type_name("[DIR]");
  cmd->callback([options, &exit_code] { exit_code = run_libra(*options); });
}

}  // namespace orrery::cli
