// sim/perturbation.h: what real clusters do to a run: slow ranks, noisy operators, degraded links,
// and the failures that cost a long job its goodput (`orrery run --perturb FILE`,
// docs/formats/perturb.md).
//
// A Perturbation is read from a small YAML file (every key checked, errors FILE:LINE) and resolved
// against a scenario's ranks and network when the scenario is created:
//   - compute: a factor on the time of every compute node (GPU and host) of the listed ranks,
//     fixed or drawn per rank from a seeded distribution (lognormal, uniform, or a tail of slow
//     ranks); several entries multiply;
//   - noise: a factor on every compute node's time drawn per (rank, node id), lognormal with mean
//   1;
//   - links: a bandwidth factor on a network dimension (ASTRA-sim's files: every link of it; a
//     graph: every link of that tier) or on the cable between two named graph nodes;
//   - hardware: ranks of another accelerator (a preset or a system file): their compute follows
//     its roofline or compute model;
//   - failures: a cable, a switch or a rank that fails at a simulated time (graphs reroute,
//     network/failing_fabric.h; a rank's failure stops the job), or a dimension of ASTRA-sim's
//     network that keeps only part of its bandwidth at some NPUs (network/dimension_failures.h);
//   - goodput: failures at a rate per component, checkpoints and restarts, over a horizon: the
//     simulated iteration time becomes useful work per unit of wall time (sim/goodput.h).
// Every draw is a pure function of (seed, rank[, node id]), so a run is the same at any thread
// count and in every simulation mode. Class mode and the symmetric path see the factors: ranks of
// different speeds are never one class, and noise (different on every rank) turns both off.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/rank_set.h"
#include "network/dimension_failures.h"
#include "network/failing_fabric.h"
#include "network/graph_yaml.h"
#include "system/system_config.h"

namespace orrery::sim {

// How one `compute` entry sets its ranks' factors.
enum class FactorLaw : uint8_t {
  kFixed,      // factor
  kLognormal,  // exp(mu + sigma z), z standard normal: median exp(mu)
  kUniform,    // uniform in [min, max]
  kTail,       // `factor` with probability `fraction`, else 1: a seeded tail of slow ranks
};

struct ComputeEntry {
  RankSet ranks = RankSet::all();
  FactorLaw law = FactorLaw::kFixed;
  double factor = 1.0;  // kFixed, kTail
  double mu = 0, sigma = 0;
  double min = 1.0, max = 1.0;
  double fraction = 0;  // kTail
  uint64_t seed = 1;
  int line = 0;  // in the file, for errors found when resolving
};

struct LinkEntry {
  std::optional<uint32_t> dimension;  // a dimension (ASTRA-sim's files) or a tier (graphs)
  std::string from, to;               // a cable between two named graph nodes, both directions
  double factor = 1.0;                // on bandwidth: 0.5 halves it
  int line = 0;
};

// Ranks of another accelerator: their compute follows this system's (roofline ceiling and memory
// bandwidth, or a preset's compute model); collectives, network and memory stay the run's.
struct HardwareEntry {
  RankSet ranks = RankSet::all();
  std::string name;  // the preset or system file as the file writes it
  std::shared_ptr<const sys::SystemConfig> system;
  int line = 0;
};

// Something that fails at a simulated time: a graph's cable (both directions), a switch (every
// link of it), a dimension of ASTRA-sim's network at some NPUs (all but `surviving` of its
// bandwidth there), or a rank (the job stops there).
struct FailureEntry {
  SimTime at;
  std::string from, to;               // a cable
  std::string switch_name;            // a switch
  std::optional<uint32_t> dimension;  // with `ranks` and `surviving`
  RankSet ranks = RankSet::all();
  std::string ranks_text;  // as written, for messages
  double surviving = 0;    // fraction of the dimension's bandwidth left at those NPUs
  std::optional<uint32_t> rank;
  int line = 0;
};

// A rank's failure that stops the run.
struct RankFailure {
  uint32_t rank = 0;
  SimTime at;
};

// A hardware preset by name, as its system configuration (the hardware layer supplies it: sim
// does not know the presets).
using PresetLoader = std::function<Expected<sys::SystemConfig>(const std::string& name)>;

// Failures, checkpoints and restarts of a long job (sim/goodput.h uses it).
struct GoodputSpec {
  double mtbf_hours = 0;    // mean time between failures of one component
  uint64_t components = 0;  // how many fail independently; 0 = the run's ranks
  double checkpoint_s = 0;  // time to write one checkpoint (the job pauses)
  double restart_s = 0;     // time from a failure to running again (detection, reload)
  double interval_s = 0;    // work between checkpoints; 0 = Daly's optimum
  double horizon_hours = 24.0 * 365;
  uint64_t seed = 1;
};

struct Perturbation {
  std::string file;  // where it was read, for messages
  std::vector<ComputeEntry> compute;
  double noise_sigma = 0;  // 0 = no noise
  uint64_t noise_seed = 1;
  std::vector<LinkEntry> links;
  std::vector<HardwareEntry> hardware;
  std::vector<FailureEntry> failures;
  std::optional<GoodputSpec> goodput;

  bool empty() const {
    return compute.empty() && noise_sigma == 0 && links.empty() && hardware.empty() &&
           failures.empty() && !goodput;
  }
};

// Reads a perturbation file. Errors (kConfig) name FILE:LINE and the key. A `hardware` entry's
// system file is read relative to the perturbation file's folder; a preset needs `presets`.
Expected<Perturbation> load_perturbation(const std::filesystem::path& path,
                                         const PresetLoader& presets = {});
Expected<Perturbation> parse_perturbation(std::string_view text, std::string_view file_name,
                                          const PresetLoader& presets = {});

// The link failures of `perturbation` on `network`'s graph or its ASTRA-sim dimensions, and the
// earliest rank failure; errors name the entry's line: a cable or switch the graph does not have
// (or named on ASTRA-sim's dimensions), a dimension the network does not have (or on a graph), a
// rank beyond the job.
struct ResolvedFailures {
  std::vector<net::LinkFailure> links;
  std::vector<net::DimensionFailure> dimensions;
  std::optional<RankFailure> rank;
};
Expected<ResolvedFailures> resolve_failures(const Perturbation& perturbation,
                                            const net::NetworkDescription& network,
                                            uint32_t rank_count);

// By rank, which hardware entry computes for it: 0 the run's own system, k hardware[k - 1] (the
// last entry listing a rank wins); an error naming the entry's line for a rank beyond the job.
Expected<std::vector<uint16_t>> hardware_of(const Perturbation& perturbation, uint32_t rank_count);

// The compute factor of every rank (size rank_count; 1.0 where no entry applies), or an error
// naming the entry's line when it lists a rank beyond the job.
Expected<std::vector<double>> compute_factors(const Perturbation& perturbation,
                                              uint32_t rank_count);

// `network` with the link entries applied (a new graph or topology; the original is untouched),
// or an error naming the entry's line: a dimension the network does not have, node names that
// are not a graph's, nodes without a cable between them, a cable on ASTRA-sim's dimensions.
Expected<std::shared_ptr<const net::NetworkDescription>> degrade_links(
    const Perturbation& perturbation, std::shared_ptr<const net::NetworkDescription> network);

}  // namespace orrery::sim
