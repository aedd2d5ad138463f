#include "design/shard_planner.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include <fmt/format.h>

#include "core/units.h"

namespace orrery::design {

namespace {

bool host_type(ShardingType type) {
  return type == ShardingType::kTableRowWise || type == ShardingType::kTableColumnWise;
}

std::string option_label(const ShardProblem& problem, const ShardOption& option) {
  return fmt::format("table '{}' ({}, {})", problem.tables[option.table].name,
                     gen::sharding_type_name(option.type), shard_kernel_name(option.kernel));
}

struct Device {
  uint32_t rank = 0;
  ShardStorage free;
  double perf = 0;
};

// A shard that fits nowhere: what it needs and the most room any candidate rank has left.
struct Failure {
  uint32_t table = 0;
  size_t shard = 0;
  ShardStorage need;
  ShardStorage room;  // the candidate with the most HBM left (and its DDR)
  uint64_t missing_hbm = 0;
  uint64_t missing_ddr = 0;
};

Failure make_failure(const ShardOption& option, size_t shard,
                     const std::vector<const Device*>& candidates) {
  Failure failure;
  failure.table = option.table;
  failure.shard = shard;
  failure.need = option.storages[shard];
  // The candidate that misses the least (HBM first: it is what binds).
  uint64_t best = std::numeric_limits<uint64_t>::max();
  for (const Device* device : candidates) {
    const uint64_t miss_hbm =
        failure.need.hbm > device->free.hbm ? failure.need.hbm - device->free.hbm : 0;
    const uint64_t miss_ddr =
        failure.need.ddr > device->free.ddr ? failure.need.ddr - device->free.ddr : 0;
    if (miss_hbm + miss_ddr < best) {
      best = miss_hbm + miss_ddr;
      failure.room = device->free;
      failure.missing_hbm = miss_hbm;
      failure.missing_ddr = miss_ddr;
    }
  }
  return failure;
}

Error failure_error(const ShardProblem& problem, const std::vector<ShardOption>& options,
                    const Failure& failure) {
  const ShardOption& option = options[failure.table];
  std::string missing;
  if (failure.missing_hbm > 0)
    missing = fmt::format("{} of HBM", format_bytes(failure.missing_hbm));
  if (failure.missing_ddr > 0) {
    missing += fmt::format("{}{} of DDR", missing.empty() ? "" : " and ",
                           format_bytes(failure.missing_ddr));
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "{} does not fit: shard {} needs {} of HBM and {} of DDR, the rank with the "
                     "most room has {} of HBM and {} of DDR left ({} missing)",
                     option_label(problem, option), failure.shard, format_bytes(failure.need.hbm),
                     format_bytes(failure.need.ddr), format_bytes(failure.room.hbm),
                     format_bytes(failure.room.ddr), missing);
}

// TorchRec's device order: least time, then local rank (spreads DDR over hosts), then rank.
bool device_before(const Device& a, const Device& b, uint32_t local_world_size) {
  if (a.perf != b.perf) return a.perf < b.perf;
  if (a.rank % local_world_size != b.rank % local_world_size) {
    return a.rank % local_world_size < b.rank % local_world_size;
  }
  return a.rank < b.rank;
}

void take(Device& device, const ShardOption& option, size_t shard) {
  device.free.hbm -= option.storages[shard].hbm;
  device.free.ddr -= option.storages[shard].ddr;
  device.perf += option.perfs[shard].total();
}

// Shard by shard onto the first device (in device order) with room, among `devices`.
bool device_partition(const ShardOption& option, std::vector<Device*>& devices,
                      uint32_t local_world_size, std::vector<uint32_t>& ranks, Failure& failure) {
  for (size_t shard = 0; shard < option.blocks.size(); ++shard) {
    Device* chosen = nullptr;
    for (Device* device : devices) {
      if (!option.storages[shard].fits_in(device->free)) continue;
      if (chosen == nullptr || device_before(*device, *chosen, local_world_size)) chosen = device;
    }
    if (chosen == nullptr) {
      failure = make_failure(option, shard, {devices.begin(), devices.end()});
      return false;
    }
    take(*chosen, option, shard);
    ranks[shard] = chosen->rank;
  }
  return true;
}

struct Placement {
  std::vector<std::vector<uint32_t>> ranks;  // per table, per shard
  std::vector<Device> devices;
};

// The greedy partitioner over one option per table; `by_perf` sorts by time instead of storage.
bool greedy_place(const std::vector<ShardOption>& options, const ShardCluster& cluster,
                  const ShardStorage& capacity, bool by_perf, Placement& placement,
                  Failure& failure) {
  const uint32_t w = cluster.world_size;
  const uint32_t lw = cluster.local_world_size;
  placement.devices.assign(w, Device{});
  for (uint32_t rank = 0; rank < w; ++rank) placement.devices[rank] = {rank, capacity, 0};
  placement.ranks.assign(options.size(), {});
  for (size_t t = 0; t < options.size(); ++t)
    placement.ranks[t].assign(options[t].blocks.size(), 0);
  // Uniform options: shard i on rank i.
  for (const ShardOption& option : options) {
    if (!uniform_type(option.type)) continue;
    for (size_t shard = 0; shard < option.blocks.size(); ++shard) {
      Device& device = placement.devices[shard];
      if (!option.storages[shard].fits_in(device.free)) {
        failure = make_failure(option, shard, {&device});
        return false;
      }
      take(device, option, shard);
      placement.ranks[option.table][shard] = static_cast<uint32_t>(shard);
    }
  }
  // The others, largest first (a stable sort: equal tables keep their order).
  std::vector<size_t> order;
  for (size_t t = 0; t < options.size(); ++t) {
    if (!uniform_type(options[t].type)) order.push_back(t);
  }
  std::vector<ShardStorage> storage(options.size());
  std::vector<double> perf(options.size(), 0);
  for (size_t t : order) {
    storage[t] = options[t].total_storage();
    perf[t] = options[t].total_perf();
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (by_perf) return perf[a] > perf[b];
    if (storage[a].hbm != storage[b].hbm) return storage[a].hbm > storage[b].hbm;
    return storage[a].ddr > storage[b].ddr;
  });
  std::vector<Device*> all(w);
  for (uint32_t rank = 0; rank < w; ++rank) all[rank] = &placement.devices[rank];
  for (size_t t : order) {
    const ShardOption& option = options[t];
    std::vector<uint32_t>& ranks = placement.ranks[t];
    if (!host_type(option.type)) {
      if (!device_partition(option, all, lw, ranks, failure)) return false;
      continue;
    }
    // Hosts by their summed time, least first; the first that holds the table wins.
    const uint32_t hosts = cluster.hosts();
    std::vector<uint32_t> host_order(hosts);
    std::iota(host_order.begin(), host_order.end(), 0);
    std::vector<double> host_perf(hosts, 0);
    for (uint32_t host = 0; host < hosts; ++host) {
      for (uint32_t local = 0; local < lw; ++local) host_perf[host] += all[host * lw + local]->perf;
    }
    std::stable_sort(host_order.begin(), host_order.end(),
                     [&](uint32_t a, uint32_t b) { return host_perf[a] < host_perf[b]; });
    bool placed = false;
    Failure first_failure;
    bool have_failure = false;
    for (uint32_t host : host_order) {
      std::vector<Device> copy(placement.devices.begin() + host * lw,
                               placement.devices.begin() + (host + 1) * lw);
      ShardStorage room;
      for (const Device& device : copy) room += device.free;
      std::vector<uint32_t> trial(option.blocks.size(), 0);
      Failure host_failure;
      bool ok = true;
      if (!storage[t].fits_in(room)) {
        ok = false;
        std::vector<const Device*> candidates;
        for (const Device& device : copy) candidates.push_back(&device);
        host_failure = make_failure(option, 0, candidates);
      } else if (option.type == ShardingType::kTableRowWise) {
        for (size_t shard = 0; shard < option.blocks.size() && ok; ++shard) {
          if (!option.storages[shard].fits_in(copy[shard].free)) {
            ok = false;
            host_failure = make_failure(option, shard, {&copy[shard]});
            break;
          }
          take(copy[shard], option, shard);
          trial[shard] = copy[shard].rank;
        }
      } else {
        std::vector<Device*> local(lw);
        for (uint32_t index = 0; index < lw; ++index) local[index] = &copy[index];
        ok = device_partition(option, local, lw, trial, host_failure);
      }
      if (ok) {
        std::copy(copy.begin(), copy.end(), placement.devices.begin() + host * lw);
        ranks = trial;
        placed = true;
        break;
      }
      if (!have_failure || host_failure.missing_hbm + host_failure.missing_ddr <
                               first_failure.missing_hbm + first_failure.missing_ddr) {
        first_failure = host_failure;
        have_failure = true;
      }
    }
    if (!placed) {
      failure = first_failure;
      return false;
    }
  }
  return true;
}

ShardPlan make_plan(const std::vector<ShardOption>& options, const Placement& placement,
                    const ShardCluster& cluster, const ShardStorage& capacity) {
  ShardPlan plan;
  plan.capacity = capacity;
  plan.rank_perf.assign(cluster.world_size, ShardPerf{});
  plan.rank_storage.assign(cluster.world_size, ShardStorage{});
  for (size_t t = 0; t < options.size(); ++t) {
    PlacedTable placed{options[t], placement.ranks[t]};
    for (size_t shard = 0; shard < placed.ranks.size(); ++shard) {
      plan.rank_perf[placed.ranks[shard]] += options[t].perfs[shard];
      plan.rank_storage[placed.ranks[shard]] += options[t].storages[shard];
    }
    plan.tables.push_back(std::move(placed));
  }
  return plan;
}

double rate(const std::vector<Device>& devices) {
  double worst = 0;
  for (const Device& device : devices) worst = std::max(worst, device.perf);
  return worst;
}

// Greedy or memory-balanced partition; a Failure when nothing fits.
bool partition(const std::vector<ShardOption>& options, const ShardCluster& cluster,
               const ShardStorage& capacity, ShardPartitioner partitioner,
               const ShardPlannerOptions& planner, Placement& placement, Failure& failure) {
  if (partitioner != ShardPartitioner::kMemoryBalanced) {
    return greedy_place(options, cluster, capacity, false, placement, failure);
  }
  // TorchRec's MemoryBalancedPartitioner: the greedy plan by time, then the smallest HBM cap
  // (binary search over (total / W, capacity]) whose greedy plan rates within the tolerance.
  if (!greedy_place(options, cluster, capacity, true, placement, failure)) return false;
  const double original = rate(placement.devices);
  uint64_t max_hbm = capacity.hbm;
  uint64_t need = 0;
  for (const ShardOption& option : options) need += option.total_storage().hbm;
  uint64_t min_hbm = need / cluster.world_size;
  constexpr uint64_t kResolution = 10ULL << 20;  // 10 MiB, as TorchRec
  for (uint32_t search = 0; search < planner.balance_searches && min_hbm + kResolution < max_hbm;
       ++search) {
    const uint64_t mid = min_hbm + (max_hbm - min_hbm) / 2;
    Placement trial;
    Failure ignored;
    if (!greedy_place(options, cluster, {mid, capacity.ddr}, true, trial, ignored)) {
      min_hbm = mid;
      continue;
    }
    if (rate(trial.devices) > original * (1 + planner.balance_tolerance)) {
      min_hbm = mid;
    } else {
      placement = std::move(trial);
      max_hbm = mid;
    }
  }
  return true;
}

std::string types_text(const std::vector<ShardingType>& types) {
  std::string text;
  for (ShardingType type : types) {
    text += fmt::format("{}{}", text.empty() ? "" : ",", gen::sharding_type_name(type));
  }
  return text;
}

// One proposal (an option index per table) made to fit: tables move to options with less HBM,
// cheapest time per byte saved first, until the partitioner places everything.
struct Proposal {
  std::string name;
  std::vector<size_t> choice;              // option index per table
  std::vector<std::vector<size_t>> moves;  // per table: the options it may move to
};

Expected<ShardPlan> fit_proposal(const ShardProblem& problem,
                                 const std::vector<std::vector<ShardOption>>& candidates,
                                 Proposal proposal, const ShardStorage& capacity,
                                 const ShardPlannerOptions& planner, size_t* partitions = nullptr,
                                 int max_attempts = 400) {
  const size_t tables = candidates.size();
  const uint32_t w = problem.cluster.world_size;
  auto option_of = [&](size_t t) -> const ShardOption& {
    return candidates[t][proposal.choice[t]];
  };
  // The best move of table t: least added time per HBM byte saved (no more DDR than it frees
  // HBM, which UVM always does).
  struct Move {
    double ratio;
    size_t table;
    size_t option;
    bool operator<(const Move& other) const {
      if (ratio != other.ratio) return ratio > other.ratio;  // min-heap on the ratio
      return table > other.table;
    }
  };
  auto best_move = [&](size_t t) -> std::optional<Move> {
    const ShardOption& current = option_of(t);
    const uint64_t hbm = current.total_storage().hbm;
    const double perf = current.total_perf();
    std::optional<Move> best;
    for (size_t index : proposal.moves[t]) {
      const ShardOption& next = candidates[t][index];
      const uint64_t next_hbm = next.total_storage().hbm;
      if (next_hbm >= hbm) continue;
      const double ratio =
          std::max(0.0, next.total_perf() - perf) / static_cast<double>(hbm - next_hbm);
      if (!best || ratio < best->ratio) best = Move{ratio, t, index};
    }
    return best;
  };
  std::priority_queue<Move> heap;
  for (size_t t = 0; t < tables; ++t) {
    if (std::optional<Move> move = best_move(t)) heap.push(*move);
  }
  auto apply_moves = [&](uint64_t bytes) -> bool {
    uint64_t freed = 0;
    bool moved = false;
    while (freed < bytes && !heap.empty()) {
      const Move move = heap.top();
      heap.pop();
      // Skip stale entries: the table moved since this entry was made.
      const std::optional<Move> fresh = best_move(move.table);
      if (!fresh || fresh->option != move.option) {
        if (fresh) heap.push(*fresh);
        continue;
      }
      const uint64_t before = option_of(move.table).total_storage().hbm;
      proposal.choice[move.table] = move.option;
      freed += before - option_of(move.table).total_storage().hbm;
      moved = true;
      if (std::optional<Move> next = best_move(move.table)) heap.push(*next);
    }
    return moved;
  };
  // First the totals: the tables' HBM must fit in the sum over the ranks.
  uint64_t need = 0;
  for (size_t t = 0; t < tables; ++t) need += option_of(t).total_storage().hbm;
  const uint64_t total = capacity.hbm * w;
  if (need > total) apply_moves(need - total);
  for (int attempt = 0;; ++attempt) {
    std::vector<ShardOption> options;
    options.reserve(tables);
    for (size_t t = 0; t < tables; ++t) options.push_back(option_of(t));
    Placement placement;
    Failure failure;
    if (partitions != nullptr) ++*partitions;
    if (partition(options, problem.cluster, capacity, planner.partitioner, planner, placement,
                  failure)) {
      ShardPlan plan = make_plan(options, placement, problem.cluster, capacity);
      plan.proposal = proposal.name;
      plan.partitioner = std::string(shard_partitioner_name(planner.partitioner));
      return plan;
    }
    if (attempt >= max_attempts) return failure_error(problem, options, failure);
    // First split the failing table: its fastest option whose largest shard fits where the
    // failing shard did not (row- or column-wise blocks, or host memory).
    {
      const size_t t = failure.table;
      const ShardOption& current = option_of(t);
      size_t split = candidates[t].size();
      for (size_t index : proposal.moves[t]) {
        const ShardOption& next = candidates[t][index];
        bool fits = true;
        for (const ShardStorage& storage : next.storages) {
          fits = fits && storage.fits_in(failure.room) && storage.hbm < failure.need.hbm;
        }
        if (fits && (split == candidates[t].size() ||
                     next.total_perf() < candidates[t][split].total_perf())) {
          split = index;
        }
      }
      if (split != candidates[t].size() && &candidates[t][split] != &current) {
        proposal.choice[t] = split;
        if (std::optional<Move> next = best_move(t)) heap.push(*next);
        continue;
      }
    }
    // Else free what the failing shard missed, and at least 1% of one rank's HBM per attempt
    // (the placement changes as tables move, so the same shard may miss more next time).
    const uint64_t step = std::max<uint64_t>(failure.missing_hbm, capacity.hbm / 100);
    if (failure.missing_hbm == 0 || !apply_moves(step)) {
      return failure_error(problem, options, failure);
    }
  }
}

// ---- the exact model ----------------------------------------------------------------------------

// A GLPK mixed-integer program built column by column; rows as sparse lists.
class Mip {
 public:
  Mip() : mip_(glp_create_prob()) { glp_set_obj_dir(mip_, GLP_MIN); }
  ~Mip() { glp_delete_prob(mip_); }
  Mip(const Mip&) = delete;
  Mip& operator=(const Mip&) = delete;

  int binary() {
    const int col = glp_add_cols(mip_, 1);
    glp_set_col_kind(mip_, col, GLP_BV);
    return col;
  }
  int continuous(double cost) {
    const int col = glp_add_cols(mip_, 1);
    glp_set_col_bnds(mip_, col, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(mip_, col, cost);
    return col;
  }
  // sum(coef x) (type) rhs with type GLP_FX (=) or GLP_UP (<=).
  void row(const std::vector<std::pair<int, double>>& terms, int type, double rhs) {
    if (terms.empty()) return;
    const int row = glp_add_rows(mip_, 1);
    glp_set_row_bnds(mip_, row, type, rhs, rhs);
    std::vector<int> index{0};
    std::vector<double> value{0};
    for (const auto& [col, coef] : terms) {
      index.push_back(col);
      value.push_back(coef);
    }
    glp_set_mat_row(mip_, row, static_cast<int>(terms.size()), index.data(), value.data());
  }
  glp_prob* get() { return mip_; }

 private:
  glp_prob* mip_;
};

struct HeuristicSeed {
  std::vector<double> values;  // 1-based column values of a feasible solution
  bool used = false;
};

void seed_callback(glp_tree* tree, void* info) {
  auto* seed = static_cast<HeuristicSeed*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !seed->used && !seed->values.empty()) {
    seed->used = true;
    glp_ios_heur_sol(tree, seed->values.data());
  }
}

// Local search from the best proposal: for the tables on the busiest rank, every other option
// is tried (a full re-partition each); the best improvement is kept, until none improves or the
// budget of partitions is spent. Deterministic: a fixed budget, ties to the first tried.
void improve_plan(const ShardProblem& problem,
                  const std::vector<std::vector<ShardOption>>& candidates,
                  const ShardStorage& capacity, const ShardPlannerOptions& planner,
                  ShardPlan& best) {
  const size_t tables = candidates.size();
  size_t budget = planner.search_budget;
  if (budget == ShardPlannerOptions::kAutoBudget) {
    budget = std::clamp<size_t>(40000 / std::max<size_t>(tables, 1), 16, 2000);
  }
  std::vector<size_t> choice(tables, 0);
  for (size_t t = 0; t < tables; ++t) {
    for (size_t o = 0; o < candidates[t].size(); ++o) {
      if (candidates[t][o].type == best.tables[t].option.type &&
          candidates[t][o].kernel == best.tables[t].option.kernel) {
        choice[t] = o;
      }
    }
  }
  std::vector<std::vector<size_t>> moves(tables);
  for (size_t t = 0; t < tables; ++t) {
    moves[t].resize(candidates[t].size());
    std::iota(moves[t].begin(), moves[t].end(), 0);
  }
  size_t used = 0;
  while (used < budget) {
    // The busiest rank and the tables with a shard on it, by their time there.
    size_t busiest = 0;
    for (size_t rank = 0; rank < best.rank_perf.size(); ++rank) {
      if (best.rank_perf[rank].total() > best.rank_perf[busiest].total()) busiest = rank;
    }
    std::vector<std::pair<double, size_t>> on_rank;
    for (size_t t = 0; t < tables; ++t) {
      double time = 0;
      for (size_t shard = 0; shard < best.tables[t].ranks.size(); ++shard) {
        if (best.tables[t].ranks[shard] == busiest) {
          time += best.tables[t].option.perfs[shard].total();
        }
      }
      if (time > 0) on_rank.push_back({-time, t});
    }
    std::stable_sort(on_rank.begin(), on_rank.end());
    if (on_rank.size() > 8) on_rank.resize(8);
    std::optional<ShardPlan> improved;
    for (const auto& [time, t] : on_rank) {
      for (size_t o = 0; o < candidates[t].size() && used < budget; ++o) {
        if (o == choice[t]) continue;
        // Table t moves to option o; if that no longer fits, other tables make room as in a
        // proposal (split, or move to options with less HBM).
        Proposal trial;
        trial.name = best.proposal;
        trial.choice = choice;
        trial.choice[t] = o;
        trial.moves = moves;
        trial.moves[t] = {o};
        Expected<ShardPlan> plan =
            fit_proposal(problem, candidates, std::move(trial), capacity, planner, &used, 8);
        if (!plan) continue;
        const double bar = improved ? improved->rating() : best.rating();
        if (plan->rating() < bar * (1 - 1e-12)) {
          improved = std::move(*plan);
        }
      }
    }
    if (!improved) break;
    // The improved plan may have moved other tables too: read its choice back.
    for (size_t t = 0; t < tables; ++t) {
      for (size_t o = 0; o < candidates[t].size(); ++o) {
        if (candidates[t][o].type == improved->tables[t].option.type &&
            candidates[t][o].kernel == improved->tables[t].option.kernel) {
          choice[t] = o;
        }
      }
    }
    improved->proposal = best.proposal.find(", improved") == std::string::npos
                             ? best.proposal + ", improved by local search"
                             : best.proposal;
    improved->partitioner = best.partitioner;
    best = std::move(*improved);
  }
}

}  // namespace

Expected<ShardPartitioner> parse_shard_partitioner(std::string_view name) {
  if (name == "greedy") return ShardPartitioner::kGreedy;
  if (name == "memory-balanced" || name == "memory_balanced") {
    return ShardPartitioner::kMemoryBalanced;
  }
  if (name == "exact" || name == "ilp") return ShardPartitioner::kExact;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown partitioner '{}' (expected greedy, memory-balanced or exact)", name);
}

std::string_view shard_partitioner_name(ShardPartitioner partitioner) {
  switch (partitioner) {
    case ShardPartitioner::kGreedy:
      return "greedy";
    case ShardPartitioner::kMemoryBalanced:
      return "memory-balanced";
    case ShardPartitioner::kExact:
      return "exact";
  }
  return "?";
}

double ShardPlan::rating() const {
  double worst = 0;
  for (const ShardPerf& perf : rank_perf) worst = std::max(worst, perf.total());
  return worst;
}

double ShardPlan::lower_bound() const {
  double total = 0;
  double largest = 0;
  for (const PlacedTable& table : tables) {
    for (const ShardPerf& perf : table.option.perfs) {
      total += perf.total();
      largest = std::max(largest, perf.total());
    }
  }
  const double ranks = rank_perf.empty() ? 1.0 : static_cast<double>(rank_perf.size());
  return std::max(total / ranks, largest);
}

Expected<ShardPlan> partition_shards(const ShardProblem& problem, std::vector<ShardOption> options,
                                     const ShardStorage& capacity, ShardPartitioner partitioner,
                                     const ShardPlannerOptions& planner) {
  for (size_t t = 0; t < options.size(); ++t) options[t].table = static_cast<uint32_t>(t);
  Placement placement;
  Failure failure;
  if (!partition(options, problem.cluster, capacity, partitioner, planner, placement, failure)) {
    return failure_error(problem, options, failure);
  }
  ShardPlan plan = make_plan(options, placement, problem.cluster, capacity);
  plan.partitioner = std::string(shard_partitioner_name(partitioner));
  plan.proposal = "given";
  return plan;
}

Expected<ShardPlan> solve_exact(const ShardProblem& problem,
                                const std::vector<std::vector<ShardOption>>& candidates,
                                const ShardStorage& capacity, double time_limit_s,
                                const ShardPlan* incumbent) {
  const ShardCluster& cluster = problem.cluster;
  const uint32_t w = cluster.world_size;
  const uint32_t lw = cluster.local_world_size;
  const uint32_t hosts = cluster.hosts();
  Mip mip;
  const int makespan = mip.continuous(1.0);
  // Per rank: (column, time) and (column, HBM), (column, DDR) terms.
  std::vector<std::vector<std::pair<int, double>>> load(w), hbm(w), ddr(w);
  auto add = [&](uint32_t rank, int col, const ShardOption& option, size_t shard) {
    load[rank].push_back({col, option.perfs[shard].total()});
    hbm[rank].push_back({col, static_cast<double>(option.storages[shard].hbm)});
    ddr[rank].push_back({col, static_cast<double>(option.storages[shard].ddr)});
  };
  // Columns of each option, to read the solution back: z, and per shard per rank the x (or, for
  // TWRW, per host the y).
  struct OptionCols {
    int z = 0;
    std::vector<std::vector<int>> x;  // [shard][rank], 0 when absent
    std::vector<int> y;               // [host]
  };
  std::vector<std::vector<OptionCols>> cols(candidates.size());
  for (size_t t = 0; t < candidates.size(); ++t) {
    std::vector<std::pair<int, double>> choose;
    for (const ShardOption& option : candidates[t]) {
      OptionCols oc;
      oc.z = mip.binary();
      choose.push_back({oc.z, 1.0});
      const size_t shards = option.blocks.size();
      if (uniform_type(option.type)) {
        for (size_t shard = 0; shard < shards; ++shard) {
          add(static_cast<uint32_t>(shard), oc.z, option, shard);
        }
      } else if (option.type == ShardingType::kTableRowWise) {
        std::vector<std::pair<int, double>> link{{oc.z, -1.0}};
        for (uint32_t host = 0; host < hosts; ++host) {
          const int y = mip.binary();
          oc.y.push_back(y);
          link.push_back({y, 1.0});
          for (size_t shard = 0; shard < shards; ++shard) {
            add(static_cast<uint32_t>(host * lw + shard), y, option, shard);
          }
        }
        mip.row(link, GLP_FX, 0.0);
      } else {
        // TW, CW: each shard on one rank; TWCW: and all on one host.
        const bool one_host = option.type == ShardingType::kTableColumnWise;
        std::vector<std::pair<int, double>> host_link{{oc.z, -1.0}};
        if (one_host) {
          for (uint32_t host = 0; host < hosts; ++host) {
            oc.y.push_back(mip.binary());
            host_link.push_back({oc.y.back(), 1.0});
          }
          mip.row(host_link, GLP_FX, 0.0);
        }
        oc.x.assign(shards, std::vector<int>(w, 0));
        for (size_t shard = 0; shard < shards; ++shard) {
          std::vector<std::pair<int, double>> link{{oc.z, -1.0}};
          for (uint32_t rank = 0; rank < w; ++rank) {
            const int x = mip.binary();
            oc.x[shard][rank] = x;
            link.push_back({x, 1.0});
            add(rank, x, option, shard);
          }
          mip.row(link, GLP_FX, 0.0);
          if (one_host) {
            for (uint32_t host = 0; host < hosts; ++host) {
              std::vector<std::pair<int, double>> within{{oc.y[host], -1.0}};
              for (uint32_t local = 0; local < lw; ++local) {
                within.push_back({oc.x[shard][host * lw + local], 1.0});
              }
              mip.row(within, GLP_FX, 0.0);
            }
          }
        }
      }
      cols[t].push_back(std::move(oc));
    }
    mip.row(choose, GLP_FX, 1.0);
  }
  for (uint32_t rank = 0; rank < w; ++rank) {
    std::vector<std::pair<int, double>> terms = load[rank];
    terms.push_back({makespan, -1.0});
    mip.row(terms, GLP_UP, 0.0);
    mip.row(hbm[rank], GLP_UP, static_cast<double>(capacity.hbm));
    mip.row(ddr[rank], GLP_UP, static_cast<double>(capacity.ddr));
  }
  // A feasible start from the incumbent plan (its options must be among the candidates).
  HeuristicSeed seed;
  if (incumbent != nullptr && incumbent->tables.size() == candidates.size()) {
    seed.values.assign(static_cast<size_t>(glp_get_num_cols(mip.get())) + 1, 0.0);
    bool complete = true;
    for (size_t t = 0; t < candidates.size() && complete; ++t) {
      const PlacedTable& placed = incumbent->tables[t];
      size_t found = candidates[t].size();
      for (size_t o = 0; o < candidates[t].size(); ++o) {
        if (candidates[t][o].type == placed.option.type &&
            candidates[t][o].kernel == placed.option.kernel) {
          found = o;
        }
      }
      if (found == candidates[t].size()) {
        complete = false;
        break;
      }
      const OptionCols& oc = cols[t][found];
      seed.values[static_cast<size_t>(oc.z)] = 1;
      const ShardingType type = placed.option.type;
      if (type == ShardingType::kTableRowWise || type == ShardingType::kTableColumnWise) {
        seed.values[static_cast<size_t>(oc.y[placed.ranks[0] / lw])] = 1;
      }
      for (size_t shard = 0; shard < oc.x.size(); ++shard) {
        seed.values[static_cast<size_t>(oc.x[shard][placed.ranks[shard]])] = 1;
      }
    }
    if (complete) {
      // A hair above the rating: GLPK checks the load rows with its own summation order.
      seed.values[static_cast<size_t>(makespan)] = incumbent->rating() * (1 + 1e-12);
    } else {
      seed.values.clear();
    }
  }
  glp_term_out(GLP_OFF);
  glp_smcp simplex;
  glp_init_smcp(&simplex);
  simplex.msg_lev = GLP_MSG_OFF;
  glp_scale_prob(mip.get(), GLP_SF_AUTO);
  const int lp = glp_simplex(mip.get(), &simplex);
  if (lp != 0 || glp_get_status(mip.get()) == GLP_NOFEAS) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the exact model has no feasible placement (the tables do not fit even "
                       "fractionally)");
  }
  glp_iocp params;
  glp_init_iocp(&params);
  params.msg_lev = GLP_MSG_OFF;
  params.tm_lim = static_cast<int>(std::min(time_limit_s, 1e6) * 1000);
  params.cb_func = seed_callback;
  params.cb_info = &seed;
  params.gmi_cuts = GLP_ON;
  params.mir_cuts = GLP_ON;
  const int code = glp_intopt(mip.get(), &params);
  const int status = glp_mip_status(mip.get());
  if (status != GLP_OPT && status != GLP_FEAS) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the exact model found no placement that fits{}",
                       code == GLP_ETMLIM ? fmt::format(" within {} s", time_limit_s) : "");
  }
  // Read the placement back.
  std::vector<ShardOption> options;
  Placement placement;
  for (size_t t = 0; t < candidates.size(); ++t) {
    size_t chosen = 0;
    for (size_t o = 0; o < candidates[t].size(); ++o) {
      if (glp_mip_col_val(mip.get(), cols[t][o].z) > 0.5) chosen = o;
    }
    const ShardOption& option = candidates[t][chosen];
    const OptionCols& oc = cols[t][chosen];
    std::vector<uint32_t> ranks(option.blocks.size(), 0);
    for (size_t shard = 0; shard < ranks.size(); ++shard) {
      if (uniform_type(option.type)) {
        ranks[shard] = static_cast<uint32_t>(shard);
      } else if (option.type == ShardingType::kTableRowWise) {
        for (uint32_t host = 0; host < hosts; ++host) {
          if (glp_mip_col_val(mip.get(), oc.y[host]) > 0.5) {
            ranks[shard] = static_cast<uint32_t>(host * lw + shard);
          }
        }
      } else {
        for (uint32_t rank = 0; rank < w; ++rank) {
          if (glp_mip_col_val(mip.get(), oc.x[shard][rank]) > 0.5) ranks[shard] = rank;
        }
      }
    }
    options.push_back(option);
    options.back().table = static_cast<uint32_t>(t);
    placement.ranks.push_back(std::move(ranks));
  }
  ShardPlan plan = make_plan(options, placement, cluster, capacity);
  plan.partitioner = "exact";
  plan.proposal = "exact model";
  plan.proven_optimal = code == 0 && status == GLP_OPT;
  // GLPK does not report the best bound after a time limit; a proven optimum is its own bound.
  plan.bound = plan.proven_optimal ? plan.rating() : plan.lower_bound();
  return plan;
}

Expected<ShardPlan> plan_shards(const ShardProblem& problem, const ShardPlannerOptions& options) {
  if (Status status = validate_shard_cluster(problem.cluster); !status) return status.error();
  if (problem.tables.empty()) {
    return Error(ErrorKind::kInvalidArgument, "no tables to plan");
  }
  for (const ShardTable& table : problem.tables) {
    if (Status status = validate_shard_table(table); !status) return status.error();
  }
  if (options.types.empty()) {
    return Error(ErrorKind::kInvalidArgument, "no sharding types allowed");
  }
  const bool only_dp = std::all_of(options.types.begin(), options.types.end(),
                                   [](ShardingType t) { return t == ShardingType::kDataParallel; });
  if (!only_dp && std::none_of(options.kernels.begin(), options.kernels.end(),
                               [](ShardKernel k) { return k != ShardKernel::kDense; })) {
    return Error(ErrorKind::kInvalidArgument,
                 "no kernels allowed (expected fused, uvm or "
                 "uvm-caching)");
  }
  Expected<ShardStorage> capacity =
      device_capacity(problem.cluster, problem.tables, problem.dense_parameter_bytes);
  if (!capacity) return capacity.error();
  std::vector<std::vector<ShardOption>> candidates;
  candidates.reserve(problem.tables.size());
  for (size_t t = 0; t < problem.tables.size(); ++t) {
    candidates.push_back(enumerate_shard_options(static_cast<uint32_t>(t), problem.tables[t],
                                                 options.types, options.kernels, problem.cluster));
  }
  // Proposals: the fastest option of every table, then every table one way.
  std::vector<Proposal> proposals;
  auto fastest = [&](size_t t, std::optional<ShardingType> type) {
    size_t best = candidates[t].size();
    for (size_t o = 0; o < candidates[t].size(); ++o) {
      if (type && candidates[t][o].type != *type) continue;
      if (best == candidates[t].size() ||
          candidates[t][o].total_perf() < candidates[t][best].total_perf()) {
        best = o;
      }
    }
    return best;
  };
  {
    Proposal mixed;
    mixed.name = options.types.size() == 1
                     ? fmt::format("every table {}", gen::sharding_type_name(options.types[0]))
                     : fmt::format("fastest option per table ({})", types_text(options.types));
    for (size_t t = 0; t < candidates.size(); ++t) {
      mixed.choice.push_back(fastest(t, std::nullopt));
      std::vector<size_t> all(candidates[t].size());
      std::iota(all.begin(), all.end(), 0);
      mixed.moves.push_back(std::move(all));
    }
    proposals.push_back(std::move(mixed));
  }
  if (options.types.size() > 1) {
    for (ShardingType type : options.types) {
      Proposal uniform;
      uniform.name = fmt::format("every table {}", gen::sharding_type_name(type));
      for (size_t t = 0; t < candidates.size(); ++t) {
        uniform.choice.push_back(fastest(t, type));
        std::vector<size_t> same;
        for (size_t o = 0; o < candidates[t].size(); ++o) {
          if (candidates[t][o].type == type) same.push_back(o);
        }
        uniform.moves.push_back(std::move(same));
      }
      proposals.push_back(std::move(uniform));
    }
  }
  ShardPlannerOptions heuristic = options;
  if (heuristic.partitioner == ShardPartitioner::kExact) {
    heuristic.partitioner = ShardPartitioner::kGreedy;
  }
  std::optional<ShardPlan> best;
  std::optional<Error> first_error;
  for (Proposal& proposal : proposals) {
    Expected<ShardPlan> plan = fit_proposal(problem, candidates, proposal, *capacity, heuristic);
    if (!plan) {
      if (!first_error) first_error = plan.error();
      continue;
    }
    if (!best || plan->rating() < best->rating()) best = std::move(*plan);
  }
  if (best) improve_plan(problem, candidates, *capacity, heuristic, *best);
  if (options.partitioner == ShardPartitioner::kExact) {
    Expected<ShardPlan> exact = solve_exact(problem, candidates, *capacity,
                                            options.exact_time_limit_s, best ? &*best : nullptr);
    if (!exact) {
      if (best) {  // keep the heuristic plan when the search found nothing in time
        best->proposal += " (the exact model found no placement within the time limit)";
        return *best;
      }
      return exact.error();
    }
    return exact;
  }
  if (!best) return *first_error;
  return *best;
}

gen::DlrmShardPlan to_shard_plan_file(const ShardProblem& problem, const ShardPlan& plan) {
  gen::DlrmShardPlan file;
  file.world_size = problem.cluster.world_size;
  file.local_world_size = problem.cluster.local_world_size;
  file.batch_size = problem.cluster.batch_size;
  file.model = problem.model;
  file.planner = fmt::format("{}: {}", plan.partitioner, plan.proposal);
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const PlacedTable& placed = plan.tables[t];
    const ShardTable& table = problem.tables[t];
    gen::PlannedTable out;
    out.name = table.name;
    out.rows = table.rows;
    out.dim = table.dim;
    out.pooling = table.pooling;
    out.dtype = table.dtype;
    out.sharding = placed.option.type;
    out.kernel = std::string(shard_kernel_name(placed.option.kernel));
    for (size_t shard = 0; shard < placed.ranks.size(); ++shard) {
      const ShardBlock& block = placed.option.blocks[shard];
      const ShardPerf& perf = placed.option.perfs[shard];
      const ShardStorage& storage = placed.option.storages[shard];
      out.shards.push_back({placed.ranks[shard], block.row_offset, block.rows, block.col_offset,
                            block.cols, perf.fwd_compute, perf.fwd_comms, perf.bwd_compute,
                            perf.bwd_comms, storage.hbm, storage.ddr});
    }
    file.tables.push_back(std::move(out));
  }
  for (size_t rank = 0; rank < plan.rank_perf.size(); ++rank) {
    const ShardPerf& perf = plan.rank_perf[rank];
    file.ranks.push_back({perf.fwd_compute, perf.fwd_comms, perf.bwd_compute, perf.bwd_comms,
                          plan.rank_storage[rank].hbm, plan.rank_storage[rank].ddr});
  }
  return file;
}

}  // namespace orrery::design
