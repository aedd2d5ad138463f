#include "sim/jobs.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cassert>
#include <map>
#include <optional>
#include <set>

#include "core/event_engine.h"
#include "core/rank_set.h"
#include "core/text_file.h"
#include "network/backend_registry.h"
#include "network/yaml_text.h"
#include "sim/simulation.h"
#include "system/collective_engine.h"
#include "workload/executor.h"

namespace orrery::sim {

namespace {

using net::yaml_line;

Error config_error(std::string_view file, const YAML::Node& node, std::string what) {
  return Error(ErrorKind::kConfig, fmt::format("{}:{}: {}", file, yaml_line(node), what));
}

// "0-63", "0-7,16-23", "5,3,1": NPUs in the order written (a job's rank r runs on the r-th).
Expected<std::vector<net::Rank>> parse_npu_list(std::string_view text) {
  Expected<std::vector<std::pair<uint32_t, uint32_t>>> ranges =
      parse_rank_ranges(text, uint32_t{1} << 24);
  if (!ranges) return ranges.error();
  std::vector<net::Rank> out;
  for (const auto& [first, last] : *ranges) {
    if (out.size() + (last - first) >= (size_t{1} << 24)) {
      return Error::make(ErrorKind::kConfig, "more than 2^24 NPUs");
    }
    for (uint32_t npu = first; npu <= last; ++npu) out.push_back(npu);
  }
  return out;
}

// The graph's logical layout cut to `ranks`: whole inner dimensions while they divide it, then
// the remainder in the next dimension.
Expected<std::vector<net::Dimension>> cut_layout(const net::Topology& graph_layout,
                                                 uint32_t ranks) {
  std::vector<net::Dimension> dims;
  uint32_t remaining = ranks;
  for (uint32_t dim = 0; dim < graph_layout.dimension_count() && remaining > 1; ++dim) {
    net::Dimension spec = graph_layout.dimension(dim);
    if (remaining <= spec.size) {
      spec.size = remaining;
      remaining = 1;
    } else if (remaining % spec.size == 0) {
      remaining /= spec.size;
    } else {
      return Error::make(ErrorKind::kConfig,
                         "{} ranks do not fill whole groups of the network's dimension {} ({} "
                         "NPUs): give a job size that does",
                         ranks, dim, spec.size);
    }
    dims.push_back(spec);
  }
  if (dims.empty()) return Error::make(ErrorKind::kConfig, "a job needs at least 2 ranks");
  return dims;
}

// Tokens of job k carry k in their top bits; the collective engine's own tokens are 32-bit.
constexpr int kJobShift = 48;
constexpr uint64_t kTokenMask = (uint64_t{1} << kJobShift) - 1;

// Hears the shared backend's deliveries and hands each to its job's network.
class JobMux final : public net::DeliveryListener {
 public:
  void add(net::DeliveryListener* listener, uint64_t* in_flight) {
    listeners_.push_back(listener);
    in_flight_.push_back(in_flight);
  }
  void on_delivered(uint64_t token) override {
    const uint64_t job = token >> kJobShift;
    --*in_flight_[job];
    listeners_[job]->on_delivered(token & kTokenMask);
  }

 private:
  std::vector<net::DeliveryListener*> listeners_;
  std::vector<uint64_t*> in_flight_;
};

// One job's view of the shared network: its ranks are NPUs placement[r], its layout its own.
class JobNetwork final : public net::NetworkBackend {
 public:
  JobNetwork(net::NetworkBackend& shared, JobMux& mux, uint32_t index, net::Topology layout,
             const std::vector<net::Rank>& placement)
      : shared_(shared),
        mux_(mux),
        index_(index),
        layout_(std::move(layout)),
        placement_(placement) {}

  std::string_view name() const override { return shared_.name(); }
  const net::Topology& topology() const override { return layout_; }
  void set_listener(net::DeliveryListener& listener) override { mux_.add(&listener, &in_flight_); }
  void send(net::Rank src, net::Rank dst, uint64_t bytes, uint64_t token) override {
    ++in_flight_;
    shared_.send(placement_[src], placement_[dst], bytes, tag(token));
  }
  void send_switch(net::Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override {
    // The job's dimension d is the graph's dimension d, cut (cut_layout).
    ++in_flight_;
    shared_.send_switch(placement_[rank], dim, up, bytes, tag(token));
  }
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<net::LinkStats> link_stats() const override { return {}; }
  size_t memory_bytes() const override { return 0; }

 private:
  uint64_t tag(uint64_t token) const {
    assert(token <= kTokenMask && "jobs: a collective engine token above 2^48");
    return (uint64_t{index_} << kJobShift) | token;
  }

  net::NetworkBackend& shared_;
  JobMux& mux_;
  uint32_t index_;
  net::Topology layout_;
  const std::vector<net::Rank>& placement_;
  uint64_t in_flight_ = 0;
};

struct SharedRun {
  std::vector<std::vector<workload::RankResult>> ranks;  // by job of `which`
  std::vector<net::LinkStats> links;
  uint64_t events = 0;
  uint64_t messages = 0;
};

// The jobs of `which` (indices into jobs.jobs) together on one engine and backend.
Expected<SharedRun> run_together(const Jobs& jobs, const std::vector<uint32_t>& which) {
  EventEngine engine;
  Expected<std::unique_ptr<net::NetworkBackend>> shared =
      net::make_backend(jobs.backend, engine, *jobs.network, jobs.settings.backend_options);
  if (!shared) return shared.error();
  JobMux mux;
  (*shared)->set_listener(mux);
  struct Running {
    std::unique_ptr<JobNetwork> network;
    std::unique_ptr<workload::WorkloadExecutor> executor;
    std::unique_ptr<sys::CollectiveEngine> collectives;
  };
  std::vector<Running> running(which.size());
  for (uint32_t k = 0; k < which.size(); ++k) {
    const Job& job = jobs.jobs[which[k]];
    const Scenario& scenario = *job.scenario;
    running[k].network = std::make_unique<JobNetwork>(**shared, mux, k, scenario.network().logical,
                                                      job.spec.placement);
    GroupTable table = group_table(scenario.groups());
    std::vector<const chakra::TraceGraph*> graphs;
    for (uint32_t rank = 0; rank < scenario.rank_count(); ++rank) {
      graphs.push_back(&scenario.traces().rank_graph(rank));
    }
    running[k].executor = std::make_unique<workload::WorkloadExecutor>(
        engine, std::move(graphs), table.ids, executor_options(scenario));
    sys::EngineOptions options;
    options.injection_scale = scenario.settings().injection_scale;
    options.queues_per_dim = scenario.settings().queues_per_dim;
    options.rounding = scenario.settings().backend_options.rounding;
    Expected<std::unique_ptr<sys::CollectiveEngine>> collectives = sys::CollectiveEngine::create(
        engine, *running[k].network, scenario.system(), options, *running[k].executor);
    if (!collectives) return collectives.error().with_context(fmt::format("job {}", job.spec.name));
    for (auto& [name, ranks] : table.declared) (*collectives)->add_group(std::move(ranks), name);
    running[k].executor->bind(**collectives);
    running[k].collectives = std::move(*collectives);
  }
  std::vector<uint32_t> order(which.size());
  for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return jobs.jobs[which[a]].spec.start < jobs.jobs[which[b]].spec.start;
  });
  auto failure = [&]() -> std::optional<Error> {
    for (uint32_t k = 0; k < running.size(); ++k) {
      const std::string name = jobs.jobs[which[k]].spec.name;
      if (running[k].executor->failure()) {
        return running[k].executor->failure()->with_context(fmt::format("job {}", name));
      }
      if (running[k].collectives->failure()) {
        return running[k].collectives->failure()->with_context(fmt::format("job {}", name));
      }
    }
    return std::nullopt;
  };
  for (uint32_t k : order) {
    const SimTime start = jobs.jobs[which[k]].spec.start;
    if (start > engine.now()) (void)engine.run_until(start);
    if (std::optional<Error> error = failure()) return *error;
    running[k].executor->start();
  }
  engine.run();
  if (std::optional<Error> error = failure()) return *error;
  SharedRun out;
  for (uint32_t k = 0; k < running.size(); ++k) {
    const workload::WorkloadExecutor& executor = *running[k].executor;
    if (!executor.all_finished()) {
      std::string detail;
      for (const std::string& line : executor.describe_stuck(8)) detail += "\n  " + line;
      for (const std::string& line : running[k].collectives->describe_pending(8))
        detail += "\n  " + line;
      return Error::make(ErrorKind::kDeadlock,
                         "job {}: the run cannot finish: no event is left at {} ns but ranks "
                         "still have work:{}",
                         jobs.jobs[which[k]].spec.name, engine.last_event_time().ns_truncated(),
                         detail);
    }
    out.ranks.push_back(executor.results());
    out.messages += running[k].collectives->messages_sent();
  }
  out.links = (*shared)->link_stats();
  out.events = engine.events_handled();
  return out;
}

}  // namespace

Expected<JobsFile> parse_jobs_file(std::string_view text, std::string_view file_name) {
  Expected<YAML::Node> parsed = net::parse_yaml_text(text, file_name);
  if (!parsed) return parsed.error();
  const YAML::Node& root = *parsed;
  JobsFile out;
  out.file = std::string(file_name);
  if (!root.IsMap())
    return config_error(file_name, root, "expected keys network, backend and jobs");
  auto scalar = [&](const YAML::Node& node, std::string_view key) -> Expected<std::string> {
    if (!node.IsScalar())
      return config_error(file_name, node, fmt::format("key '{}': expected a value", key));
    return node.as<std::string>();
  };
  bool has_jobs = false;
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    if (key == "network" || key == "backend") {
      Expected<std::string> text_value = scalar(value, key);
      if (!text_value) return text_value.error();
      (key == "network" ? out.network : out.backend) = *text_value;
    } else if (key == "jobs") {
      has_jobs = true;
      if (!value.IsSequence() || value.size() == 0) {
        return config_error(file_name, value, "jobs: expected a list of jobs");
      }
      for (const YAML::Node& item : value) {
        if (!item.IsMap()) return config_error(file_name, item, "jobs: expected a job's keys");
        JobSpec job;
        job.line = yaml_line(item);
        bool has_placement = false;
        for (const auto& field : item) {
          const std::string name = field.first.as<std::string>();
          const YAML::Node& v = field.second;
          Expected<std::string> s = scalar(v, name);
          if (!s) return s.error();
          if (name == "name") {
            job.name = *s;
          } else if (name == "workload") {
            job.workload = *s;
          } else if (name == "system") {
            job.system = *s;
          } else if (name == "comm_groups") {
            job.comm_groups = *s;
          } else if (name == "placement") {
            has_placement = true;
            Expected<std::vector<net::Rank>> npus = parse_npu_list(*s);
            if (!npus)
              return config_error(file_name, v, "key 'placement': " + npus.error().message());
            job.placement = std::move(*npus);
          } else if (name == "start_ns") {
            uint64_t ns = 0;
            if (!YAML::convert<uint64_t>::decode(v, ns) || ns > (uint64_t{1} << 40)) {
              return config_error(file_name, v,
                                  "key 'start_ns': expected whole nanoseconds up to 2^40");
            }
            job.start = SimTime::from_ns(static_cast<int64_t>(ns));
          } else {
            return config_error(file_name, field.first,
                                fmt::format("job: unknown key '{}' (known: name, workload, system, "
                                            "comm_groups, placement, start_ns)",
                                            name));
          }
        }
        for (const auto& [missing, present] :
             {std::pair{"name", !job.name.empty()}, std::pair{"workload", !job.workload.empty()},
              std::pair{"system", !job.system.empty()}, std::pair{"placement", has_placement}}) {
          if (!present) {
            return config_error(file_name, item, fmt::format("job: key '{}' is missing", missing));
          }
        }
        for (const JobSpec& other : out.jobs) {
          if (other.name == job.name) {
            return config_error(
                file_name, item,
                fmt::format("job '{}' is named twice (first on line {})", job.name, other.line));
          }
        }
        out.jobs.push_back(std::move(job));
      }
    } else {
      return config_error(file_name, entry.first,
                          fmt::format("unknown key '{}' (known: network, backend, jobs)", key));
    }
  }
  if (out.network.empty()) return config_error(file_name, root, "key 'network' is missing");
  if (!has_jobs) return config_error(file_name, root, "key 'jobs' is missing");
  return out;
}

Expected<Jobs> load_jobs(const std::filesystem::path& path, RunSettings settings) {
  Expected<std::string> text = read_text_file(path, "the jobs file");
  if (!text) return text.error();
  Expected<JobsFile> file = parse_jobs_file(*text, path.string());
  if (!file) return file.error();
  const std::filesystem::path dir = path.parent_path();
  auto beside = [&](const std::string& name) {
    const std::filesystem::path p(name);
    return (p.is_relative() ? dir / p : p).string();
  };
  Jobs jobs;
  jobs.file = path.string();
  jobs.backend = file->backend;
  jobs.network_name = beside(file->network);
  Expected<net::NetworkDescription> network = net::load_network_file(jobs.network_name);
  if (!network) return network.error();
  if (!network->graph) {
    return Error::make(ErrorKind::kConfig,
                       "{}: several jobs share a graph topology (docs/formats/topology.md); {} is "
                       "an ASTRA-sim network",
                       jobs.file, jobs.network_name);
  }
  const net::BackendInfo* backend = net::find_backend(jobs.backend);
  if (backend == nullptr || !backend->on_graphs) {
    return Error::make(ErrorKind::kConfig, "{}: backend '{}' does not run on graph topologies ({})",
                       jobs.file, jobs.backend, net::backend_names_text());
  }
  jobs.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  const uint32_t npus = jobs.network->logical.rank_count();
  settings.backend = jobs.backend;
  settings.fast_path = false;
  jobs.settings = settings;
  std::vector<int> owner(npus, -1);
  for (size_t index = 0; index < file->jobs.size(); ++index) {
    JobSpec& spec = file->jobs[index];
    const std::string where = fmt::format("{}:{}: job {}", jobs.file, spec.line, spec.name);
    for (net::Rank npu : spec.placement) {
      if (npu >= npus) {
        return Error::make(ErrorKind::kConfig, "{}: NPU {} is beyond the network's {} NPUs", where,
                           npu, npus);
      }
      if (owner[npu] >= 0) {
        return Error::make(ErrorKind::kConfig, "{}: NPU {} is already {}", where, npu,
                           owner[npu] == static_cast<int>(index)
                               ? std::string("in its placement")
                               : "job " + file->jobs[static_cast<size_t>(owner[npu])].name + "'s");
      }
      owner[npu] = static_cast<int>(index);
    }
    const auto ranks = static_cast<uint32_t>(spec.placement.size());
    Expected<std::vector<net::Dimension>> layout = cut_layout(jobs.network->logical, ranks);
    if (!layout) return layout.error().with_context(where);
    Expected<net::Topology> topology = net::Topology::create(std::move(*layout));
    if (!topology) return topology.error().with_context(where);
    // The job's own scenario: its ranks, its traces, its groups, its system; checked by the
    // analytical model's rules (the shared backend runs it).
    ScenarioFiles files;
    files.workload = beside(spec.workload);
    files.system = beside(spec.system);
    if (!spec.comm_groups.empty()) files.comm_groups = beside(spec.comm_groups);
    files.threads = settings.threads;
    files.network = fmt::format("{} ({} NPUs of {})", spec.name, ranks, jobs.network_name);
    files.network_description = std::make_shared<const net::NetworkDescription>(
        net::NetworkDescription{std::move(*topology), nullptr, {}});
    RunSettings job_settings = settings;
    job_settings.backend = "analytical";
    Expected<Scenario> scenario = load_scenario(files, job_settings);
    if (!scenario) return scenario.error().with_context(where);
    jobs.jobs.push_back({spec, std::make_shared<const Scenario>(std::move(*scenario))});
  }
  return jobs;
}

Expected<JobsResult> run_jobs(const Jobs& jobs) {
  std::vector<uint32_t> all(jobs.jobs.size());
  for (uint32_t k = 0; k < all.size(); ++k) all[k] = k;
  Expected<SharedRun> shared = run_together(jobs, all);
  if (!shared) return shared.error();
  JobsResult result;
  result.events = shared->events;
  result.messages = shared->messages;
  std::map<net::LinkId, size_t> link_index;
  for (const net::LinkStats& stats : shared->links) {
    link_index.emplace(stats.link, result.links.size());
    JobLink link;
    link.stats = stats;
    const net::GraphLink& graph_link = jobs.network->graph->link(stats.link);
    link.src = jobs.network->graph->node_name(graph_link.src);
    link.dst = jobs.network->graph->node_name(graph_link.dst);
    result.links.push_back(std::move(link));
  }
  auto summarize = [](const std::vector<workload::RankResult>& ranks, SimTime start,
                      SimTime& iteration, SimTime& compute, SimTime& exposed) {
    SimTime compute_sum, exposed_sum;
    for (const workload::RankResult& rank : ranks) {
      iteration = std::max(iteration, rank.finish - start);
      compute_sum += rank.gpu_compute;
      exposed_sum += rank.finish - start - rank.gpu_compute;
    }
    const auto count = static_cast<int64_t>(std::max<size_t>(ranks.size(), 1));
    compute = SimTime::from_ps(compute_sum.ps() / count);
    exposed = SimTime::from_ps(exposed_sum.ps() / count);
  };
  for (uint32_t k = 0; k < jobs.jobs.size(); ++k) {
    const Job& job = jobs.jobs[k];
    JobResult out;
    out.name = job.spec.name;
    out.ranks = static_cast<uint32_t>(job.spec.placement.size());
    out.start = job.spec.start;
    summarize(shared->ranks[k], job.spec.start, out.iteration, out.compute_mean, out.exposed_mean);
    out.ranks_detail = shared->ranks[k];
    for (const workload::RankResult& rank : shared->ranks[k])
      result.end = std::max(result.end, rank.finish);
    // Alone: the same job from time zero on the idle network.
    Jobs single = jobs;
    single.jobs = {job};
    single.jobs[0].spec.start = SimTime::zero();
    Expected<SharedRun> alone = run_together(single, {0});
    if (!alone) return alone.error();
    SimTime compute, exposed;
    summarize(alone->ranks[0], SimTime::zero(), out.alone, compute, exposed);
    out.slowdown = out.alone.ps() > 0 ? static_cast<double>(out.iteration.ps()) /
                                            static_cast<double>(out.alone.ps())
                                      : 1.0;
    for (const net::LinkStats& stats : alone->links) {
      auto found = link_index.find(stats.link);
      if (found == link_index.end()) continue;  // cannot happen: the routes are the same
      result.links[found->second].jobs.push_back(k);
      result.links[found->second].bytes_by_job.push_back(stats.bytes);
    }
    result.jobs.push_back(std::move(out));
  }
  return result;
}

}  // namespace orrery::sim
