#include "design/sweep_space.h"

#include <functional>

#include <fmt/format.h>

#include "core/units.h"

namespace orrery::design {

namespace {

using Next = std::function<void(SweepPoint&)>;
using Level = std::function<void(SweepPoint&, const Next&)>;

std::vector<uint32_t> divisors(uint64_t n) {
  std::vector<uint32_t> out;
  for (uint64_t d = 1; d <= n && d <= UINT32_MAX; ++d) {
    if (n % d == 0) out.push_back(static_cast<uint32_t>(d));
  }
  return out;
}

// An axis level: its listed values, or (all) the values `allowed` computes from the point so far.
// A branch the rules have refused already takes one placeholder value (the first listed, else
// `fallback`) so that it stays one point. When `all` allows nothing, one point carries `why`.
template <typename T, typename Set>
Level level(const Axis<T>& axis, T fallback, Set set,
            std::function<std::vector<T>(const SweepPoint&, std::string& why)> allowed = {}) {
  return [&axis, fallback, set, allowed](SweepPoint& point, const Next& next) {
    std::vector<T> values;
    std::string why;
    if (!point.reason.empty()) {
      values.push_back(axis.values.empty() ? fallback : axis.values.front());
    } else if (axis.all || axis.values.empty()) {
      values = allowed ? allowed(point, why) : std::vector<T>{fallback};
    } else {
      values = axis.values;
    }
    if (values.empty()) {
      SweepPoint rejected = point;
      set(rejected, fallback);
      rejected.reason = why;
      next(rejected);
      return;
    }
    for (const T& value : values) {
      SweepPoint copy = point;
      set(copy, value);
      next(copy);
    }
  };
}

uint32_t seq_of(const SweepSpec& spec) { return spec.seq != 0 ? spec.seq : spec.llm.seq; }

// The reason the rules refuse a fully listed point, or "".
std::string check_rules(const SweepSpec& spec, const SweepPoint& point) {
  const ClusterPoint& c = point.cluster;
  uint64_t product = 1;
  std::vector<std::string> sizes;
  for (const DimensionPoint& d : c.network) {
    product *= d.size;
    sizes.push_back(std::to_string(d.size));
  }
  if (product != c.accelerators) {
    return fmt::format("the network's dimensions {} hold {} accelerators, not {}",
                       fmt::join(sizes, " x "), product, c.accelerators);
  }
  const PlanPoint& p = point.plan;
  const uint64_t expansion_share = c.expansion_bytes / spec.expansion_shared_by;
  if (spec.workload == SweepWorkload::kDlrm) {
    gen::DlrmPlan plan;
    plan.ranks = c.accelerators;
    plan.global_batch = spec.global_batch;
    plan.sharding = *gen::parse_sharding(p.sharding);
    if (Status s = gen::validate_dlrm_plan(spec.dlrm, plan); !s) return s.error().message();
    return "";
  }
  const uint64_t ranks = uint64_t{p.tp} * p.cp * p.pp * p.dp;
  if (ranks != c.accelerators) {
    return fmt::format("tp x cp x pp x dp = {} x {} x {} x {} = {}, not the {} accelerators", p.tp,
                       p.cp, p.pp, p.dp, ranks, c.accelerators);
  }
  gen::ParallelPlan plan = llm_plan_of(spec, point);
  if (Status s = gen::validate_plan(spec.llm, plan); !s) return s.error().message();
  if (!p.offload.automatic && p.offload.set != 0 && expansion_share == 0) {
    return fmt::format("offload {} needs an expansion tier (its capacity is 0)",
                       offload_name(p.offload));
  }
  return "";
}

}  // namespace

gen::ParallelPlan llm_plan_of(const SweepSpec& spec, const SweepPoint& point) {
  const PlanPoint& p = point.plan;
  gen::ParallelPlan plan;
  plan.dp = p.dp;
  plan.tp = p.tp;
  plan.pp = p.pp;
  plan.cp = p.cp;
  plan.ep = p.ep;
  plan.sp = p.sp;
  plan.zero = p.zero;
  plan.recompute = p.recompute;
  plan.schedule = p.schedule == "interleaved" ? gen::PipelineSchedule::kInterleaved
                                              : gen::PipelineSchedule::k1F1B;
  plan.virtual_stages = p.virtual_stages;
  plan.global_batch = spec.global_batch;
  plan.micro_batch = p.micro_batch;
  plan.seq = spec.seq;
  return plan;
}

Expected<std::vector<SweepPoint>> expand_sweep(const SweepSpec& spec, uint64_t max_points) {
  std::vector<Level> levels;
  // ---- the cluster ----
  levels.push_back(level<uint32_t>(spec.accelerators, 1,
                                   [](SweepPoint& q, uint32_t v) { q.cluster.accelerators = v; }));
  levels.push_back(level<double>(spec.peak_tflops, 0,
                                 [](SweepPoint& q, double v) { q.cluster.peak_tflops = v; }));
  levels.push_back(
      level<double>(spec.efficiency, 1, [](SweepPoint& q, double v) { q.cluster.efficiency = v; }));
  levels.push_back(level<uint64_t>(spec.hbm_bytes, 0,
                                   [](SweepPoint& q, uint64_t v) { q.cluster.hbm_bytes = v; }));
  levels.push_back(
      level<double>(spec.hbm_gbps, 0, [](SweepPoint& q, double v) { q.cluster.hbm_gbps = v; }));
  for (size_t d = 0; d < spec.network.size(); ++d) {
    const DimensionSpec& dim = spec.network[d];
    levels.push_back(level<uint32_t>(dim.size, 0, [d, &spec](SweepPoint& q, uint32_t v) {
      if (q.cluster.network.size() < spec.network.size()) {
        q.cluster.network.resize(spec.network.size());
      }
      q.cluster.network[d].topology = spec.network[d].topology;
      q.cluster.network[d].size = v;
    }));
    levels.push_back(level<double>(dim.bandwidth_gbps, 0, [d](SweepPoint& q, double v) {
      q.cluster.network[d].bandwidth_gbps = v;
    }));
    levels.push_back(level<double>(
        dim.latency_ns, 0, [d](SweepPoint& q, double v) { q.cluster.network[d].latency_ns = v; }));
  }
  // The size 'rest' resolves once every dimension has a size.
  levels.push_back([](SweepPoint& point, const Next& next) {
    uint64_t others = 1;
    size_t rest = SIZE_MAX;
    for (size_t d = 0; d < point.cluster.network.size(); ++d) {
      if (point.cluster.network[d].size == 0) {
        rest = d;
      } else {
        others *= point.cluster.network[d].size;
      }
    }
    if (rest != SIZE_MAX && point.reason.empty()) {
      const uint32_t n = point.cluster.accelerators;
      if (n % others != 0 || n / others < 2) {
        point.reason = fmt::format(
            "network dimension {} (size rest): {} accelerators {} the other dimensions' {}", rest,
            n, n % others != 0 ? "are not a multiple of" : "leave fewer than 2 ranks beside",
            others);
      } else {
        point.cluster.network[rest].size = static_cast<uint32_t>(n / others);
      }
    }
    next(point);
  });
  levels.push_back(level<uint64_t>(
      spec.expansion_bytes, 0, [](SweepPoint& q, uint64_t v) { q.cluster.expansion_bytes = v; }));
  levels.push_back(level<double>(spec.expansion_gbps, 1,
                                 [](SweepPoint& q, double v) { q.cluster.expansion_gbps = v; }));
  levels.push_back(level<double>(spec.expansion_latency_ns, 0, [](SweepPoint& q, double v) {
    q.cluster.expansion_latency_ns = v;
  }));

  // ---- the plan ----
  const gen::TransformerModel& model = spec.llm;
  const uint64_t batch = spec.global_batch;
  if (spec.workload == SweepWorkload::kDlrm) {
    levels.push_back(level<std::string>(
        spec.sharding, "table", [](SweepPoint& q, const std::string& v) { q.plan.sharding = v; },
        [](const SweepPoint&, std::string&) {
          return std::vector<std::string>{"table", "row", "column"};
        }));
  } else {
    levels.push_back(level<uint32_t>(
        spec.tp, 1, [](SweepPoint& q, uint32_t v) { q.plan.tp = v; },
        [&model](const SweepPoint& q, std::string& why) {
          std::vector<uint32_t> out;
          for (uint32_t t : divisors(q.cluster.accelerators)) {
            if (model.heads % t == 0 && model.kv_heads % t == 0 && model.ffn % t == 0 &&
                model.expert_ffn() % t == 0) {
              out.push_back(t);
            }
          }
          why = "no tp divides the accelerators, the heads and the MLP size";
          return out;
        }));
    levels.push_back(level<uint32_t>(
        spec.cp, 1, [](SweepPoint& q, uint32_t v) { q.plan.cp = v; },
        [&spec](const SweepPoint& q, std::string& why) {
          std::vector<uint32_t> out;
          if (q.cluster.accelerators % q.plan.tp == 0) {
            for (uint32_t c : divisors(q.cluster.accelerators / q.plan.tp)) {
              if (seq_of(spec) % c == 0) out.push_back(c);
            }
          }
          why = fmt::format("tp {} does not divide the {} accelerators", q.plan.tp,
                            q.cluster.accelerators);
          return out;
        }));
    levels.push_back(level<uint32_t>(
        spec.pp, 1, [](SweepPoint& q, uint32_t v) { q.plan.pp = v; },
        [&model](const SweepPoint& q, std::string& why) {
          std::vector<uint32_t> out;
          const uint64_t inner = uint64_t{q.plan.tp} * q.plan.cp;
          if (q.cluster.accelerators % inner == 0) {
            for (uint32_t p : divisors(q.cluster.accelerators / inner)) {
              if (model.layers % p == 0) out.push_back(p);
            }
          }
          why = fmt::format("tp x cp = {} does not divide the {} accelerators", inner,
                            q.cluster.accelerators);
          return out;
        }));
    levels.push_back(level<uint32_t>(
        spec.dp, 0, [](SweepPoint& q, uint32_t v) { q.plan.dp = v; },
        [](const SweepPoint& q, std::string& why) {
          const uint64_t inner = uint64_t{q.plan.tp} * q.plan.cp * q.plan.pp;
          why = fmt::format("tp x cp x pp = {} does not divide the {} accelerators", inner,
                            q.cluster.accelerators);
          if (q.cluster.accelerators % inner != 0) return std::vector<uint32_t>{};
          return std::vector<uint32_t>{static_cast<uint32_t>(q.cluster.accelerators / inner)};
        }));
    levels.push_back(level<uint32_t>(
        spec.ep, 1, [](SweepPoint& q, uint32_t v) { q.plan.ep = v; },
        [&model](const SweepPoint& q, std::string&) {
          if (!model.is_moe() || q.plan.dp == 0) return std::vector<uint32_t>{1};
          std::vector<uint32_t> out;
          for (uint32_t e : divisors(q.plan.dp)) {
            if (model.experts % e == 0) out.push_back(e);
          }
          return out;
        }));
    levels.push_back(level<uint64_t>(
        spec.micro_batch, 1, [](SweepPoint& q, uint64_t v) { q.plan.micro_batch = v; },
        [batch](const SweepPoint& q, std::string& why) {
          std::vector<uint64_t> out;
          if (q.plan.dp != 0 && batch % q.plan.dp == 0) {
            for (uint32_t b : divisors(batch / q.plan.dp)) out.push_back(b);
          }
          why = fmt::format(
              "the global batch of {} sequences is not a multiple of dp {}: no "
              "micro-batch size fits",
              batch, q.plan.dp);
          return out;
        }));
    levels.push_back(level<bool>(
        spec.sp, false, [](SweepPoint& q, bool v) { q.plan.sp = v; },
        [](const SweepPoint& q, std::string&) {
          return q.plan.tp >= 2 ? std::vector<bool>{false, true} : std::vector<bool>{false};
        }));
    levels.push_back(level<uint32_t>(
        spec.zero, 0, [](SweepPoint& q, uint32_t v) { q.plan.zero = v; },
        [](const SweepPoint&, std::string&) {
          return std::vector<uint32_t>{0, 1, 2, 3};
        }));
    levels.push_back(level<bool>(
        spec.recompute, false, [](SweepPoint& q, bool v) { q.plan.recompute = v; },
        [](const SweepPoint&, std::string&) {
          return std::vector<bool>{false, true};
        }));
    levels.push_back(level<std::string>(
        spec.schedule, "1f1b", [](SweepPoint& q, const std::string& v) { q.plan.schedule = v; },
        [batch](const SweepPoint& q, std::string&) {
          std::vector<std::string> out{"1f1b"};
          const uint64_t per = q.plan.micro_batch * q.plan.dp;
          if (q.plan.pp >= 2 && per != 0 && batch % per == 0 && (batch / per) % q.plan.pp == 0) {
            out.emplace_back("interleaved");
          }
          return out;
        }));
    levels.push_back(level<uint32_t>(
        spec.virtual_stages, 1, [](SweepPoint& q, uint32_t v) { q.plan.virtual_stages = v; },
        [&spec, &model](const SweepPoint& q, std::string& why) {
          if (q.plan.schedule != "interleaved") return std::vector<uint32_t>{1};
          if (!spec.virtual_stages.all) return std::vector<uint32_t>{2};  // the default
          std::vector<uint32_t> out;
          for (uint32_t v = 2; uint64_t{v} * q.plan.pp <= model.layers; ++v) {
            if (model.layers % (v * q.plan.pp) == 0) out.push_back(v);
          }
          why = fmt::format("no virtual stage count v >= 2 has pp {} x v dividing the {} layers",
                            q.plan.pp, model.layers);
          return out;
        }));
    levels.push_back(level<OffloadChoice>(
        spec.offload, OffloadChoice{},
        [](SweepPoint& q, const OffloadChoice& v) { q.plan.offload = v; },
        [&spec](const SweepPoint& q, std::string&) {
          std::vector<OffloadChoice> out{OffloadChoice{}};
          if (q.cluster.expansion_bytes / spec.expansion_shared_by > 0) {
            for (uint32_t set = 1; set <= kOffloadAll; ++set) out.push_back({false, set});
          }
          return out;
        }));
  }

  std::vector<SweepPoint> points;
  bool too_many = false;
  std::function<void(size_t, SweepPoint&)> run = [&](size_t index, SweepPoint& point) {
    if (too_many) return;
    if (index == levels.size()) {
      if (points.size() >= max_points) {
        too_many = true;
        return;
      }
      SweepPoint& added = points.emplace_back(point);
      added.id = points.size() - 1;
      if (added.reason.empty()) added.reason = check_rules(spec, added);
      return;
    }
    levels[index](point, [&](SweepPoint& next) { run(index + 1, next); });
  };
  SweepPoint start;
  start.cluster.network.resize(spec.network.size());
  run(0, start);
  if (too_many) {
    return Error::make(ErrorKind::kConfig, "{}: the sweep has more than {} points", spec.path,
                       format_count(max_points));
  }
  return points;
}

std::vector<Column> axis_columns(const SweepSpec& spec) {
  std::vector<Column> columns = {{"accelerators", ColumnType::kInteger},
                                 {"peak_tflops", ColumnType::kReal},
                                 {"efficiency", ColumnType::kReal},
                                 {"hbm_gib", ColumnType::kReal},
                                 {"hbm_gbps", ColumnType::kReal}};
  for (size_t d = 0; d < spec.network.size(); ++d) {
    columns.push_back({fmt::format("net{}_size", d), ColumnType::kInteger});
    columns.push_back({fmt::format("net{}_gbps", d), ColumnType::kReal});
    columns.push_back({fmt::format("net{}_latency_ns", d), ColumnType::kReal});
  }
  columns.push_back({"expansion_gib", ColumnType::kReal});
  columns.push_back({"expansion_gbps", ColumnType::kReal});
  columns.push_back({"expansion_latency_ns", ColumnType::kReal});
  if (spec.workload == SweepWorkload::kDlrm) {
    columns.push_back({"sharding", ColumnType::kText});
    return columns;
  }
  for (const char* name :
       {"tp", "cp", "pp", "dp", "ep", "micro_batch", "sp", "zero", "recompute"}) {
    columns.push_back({name, ColumnType::kInteger});
  }
  columns.push_back({"schedule", ColumnType::kText});
  columns.push_back({"virtual_stages", ColumnType::kInteger});
  columns.push_back({"offload", ColumnType::kText});
  return columns;
}

std::vector<Value> axis_values(const SweepSpec& spec, const SweepPoint& point) {
  const ClusterPoint& c = point.cluster;
  auto num = [](double v) { return Value{v, ""}; };
  std::vector<Value> values = {num(c.accelerators), num(c.peak_tflops), num(c.efficiency),
                               num(static_cast<double>(c.hbm_bytes) / kGiB), num(c.hbm_gbps)};
  for (const DimensionPoint& d : c.network) {
    values.push_back(num(d.size));
    values.push_back(num(d.bandwidth_gbps));
    values.push_back(num(d.latency_ns));
  }
  values.push_back(num(static_cast<double>(c.expansion_bytes) / kGiB));
  values.push_back(num(c.expansion_gbps));
  values.push_back(num(c.expansion_latency_ns));
  const PlanPoint& p = point.plan;
  if (spec.workload == SweepWorkload::kDlrm) {
    values.push_back({0, p.sharding});
    return values;
  }
  for (double v :
       {double(p.tp), double(p.cp), double(p.pp), double(p.dp), double(p.ep), double(p.micro_batch),
        p.sp ? 1.0 : 0.0, double(p.zero), p.recompute ? 1.0 : 0.0}) {
    values.push_back(num(v));
  }
  values.push_back({0, p.schedule});
  values.push_back(num(p.virtual_stages));
  values.push_back({0, offload_name(p.offload)});
  return values;
}

}  // namespace orrery::design
