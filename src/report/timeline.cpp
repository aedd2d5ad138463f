#include "report/timeline.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "system/collective.h"

namespace orrery::report {

namespace {

using workload::Activity;

// Track ids: each activity owns a block of thread ids, one per lane.
constexpr uint32_t kLaneBlock = 1000;

std::string_view track_name(Activity activity) {
  switch (activity) {
    case Activity::kCompute:
      return "accelerator compute";
    case Activity::kCpu:
      return "host CPU";
    case Activity::kCollective:
      return "collectives";
    case Activity::kSend:
      return "sends";
    case Activity::kRecv:
      return "receives";
    case Activity::kMemory:
      return "memory";
  }
  return "other";
}

// Microseconds with picosecond resolution, as Chrome's format wants them.
std::string micros(SimTime time) {
  return fmt::format("{:.6f}", static_cast<double>(time.ps()) / 1e6);
}

nlohmann::json node_args(const workload::ActivityRecord& record, const chakra::TraceGraph& graph) {
  const chakra::NodeIndex node = record.node;
  nlohmann::json args = {{"node", graph.id(node)},
                         {"type", chakra::node_type_name(graph.type(node))}};
  auto copy_uint = [&](const char* name) {
    Expected<std::optional<uint64_t>> value = graph.get_uint(node, name);
    if (value && value->has_value()) args[name] = **value;
  };
  switch (record.activity) {
    case Activity::kCollective: {
      Expected<std::optional<int64_t>> type = graph.get_int(node, "comm_type");
      if (type && type->has_value()) {
        if (auto collective = sys::collective_from_chakra(**type)) {
          args["collective"] = std::string(sys::collective_name(*collective));
        }
      }
      copy_uint("comm_size");
      Expected<std::optional<std::string_view>> group = graph.get_string(node, "pg_name");
      if (group && group->has_value()) args["pg_name"] = std::string(**group);
      break;
    }
    case Activity::kSend:
    case Activity::kRecv:
      copy_uint(record.activity == Activity::kSend ? "comm_dst" : "comm_src");
      copy_uint("comm_size");
      copy_uint("comm_tag");
      break;
    case Activity::kCompute:
    case Activity::kCpu:
      copy_uint("num_ops");
      copy_uint("tensor_size");
      break;
    case Activity::kMemory:
      copy_uint("tensor_size");
      break;
  }
  return args;
}

}  // namespace

void TimelineRecorder::on_activity(const workload::ActivityRecord& record,
                                   const chakra::TraceGraph& graph) {
  // Rank 0 is kept even when not asked for: in a symmetric run it stands for every rank.
  if (!ranks_.contains(record.rank) && record.rank != 0) return;
  Slice slice;
  slice.record = record;
  slice.name = std::string(graph.name(record.node));
  if (slice.name.empty()) slice.name = fmt::format("node {}", graph.id(record.node));
  slice.args = node_args(record, graph).dump();
  slices_.push_back(std::move(slice));
}

void TimelineRecorder::replicate_representative(uint32_t ranks) {
  const size_t representative = slices_.size();
  for (uint32_t rank = 1; rank < ranks; ++rank) {
    if (!ranks_.contains(rank)) continue;
    for (size_t idx = 0; idx < representative; ++idx) {
      if (slices_[idx].record.rank != 0) continue;
      Slice copy = slices_[idx];
      copy.record.rank = rank;
      slices_.push_back(std::move(copy));
    }
  }
  // Rank 0 itself was recorded only to stand for the others.
  if (!ranks_.contains(0)) {
    slices_.erase(std::remove_if(slices_.begin(), slices_.end(),
                                 [](const Slice& slice) { return slice.record.rank == 0; }),
                  slices_.end());
  }
}

Status TimelineRecorder::write(const std::string& path) const {
  // Lanes: within one rank and activity, slices sorted by start go to the first lane that is free
  // by then, so slices on one track never overlap.
  std::vector<size_t> order(slices_.size());
  for (size_t idx = 0; idx < order.size(); ++idx) order[idx] = idx;
  auto key = [this](size_t idx) {
    const workload::ActivityRecord& record = slices_[idx].record;
    return std::make_tuple(record.rank, static_cast<int>(record.activity), record.start, record.end,
                           record.node);
  };
  std::sort(order.begin(), order.end(),
            [&](size_t lhs, size_t rhs) { return key(lhs) < key(rhs); });

  std::ofstream out(path);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot create", path);
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    out << (first ? "" : ",\n") << event;
    first = false;
  };
  std::map<std::pair<uint32_t, uint32_t>, bool> named_threads;
  uint32_t current_rank = UINT32_MAX;
  int current_activity = -1;
  std::vector<SimTime> lane_end;
  for (size_t idx : order) {
    const Slice& slice = slices_[idx];
    const workload::ActivityRecord& record = slice.record;
    if (record.rank != current_rank) {
      current_rank = record.rank;
      current_activity = -1;
      emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})",
                       record.rank, record.rank));
      emit(fmt::format(
          R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})",
          record.rank, record.rank));
    }
    if (static_cast<int>(record.activity) != current_activity) {
      current_activity = static_cast<int>(record.activity);
      lane_end.clear();
    }
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > record.start) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(record.end);
    lane_end[lane] = record.end;
    const uint32_t tid =
        (static_cast<uint32_t>(record.activity) + 1) * kLaneBlock + static_cast<uint32_t>(lane);
    if (!named_threads[{record.rank, tid}]) {
      named_threads[{record.rank, tid}] = true;
      const std::string name = lane == 0
                                   ? std::string(track_name(record.activity))
                                   : fmt::format("{} #{}", track_name(record.activity), lane + 1);
      emit(
          fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
                      record.rank, tid, nlohmann::json(name).dump()));
      emit(fmt::format(
          R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
          record.rank, tid, tid));
    }
    emit(fmt::format(
        R"({{"name":{},"cat":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{}}})",
        nlohmann::json(slice.name).dump(), workload::activity_name(record.activity),
        micros(record.start), micros(record.end - record.start), record.rank, tid, slice.args));
  }
  out << "\n]}\n";
  out.close();  // a full disk may show only at the final flush
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
}

}  // namespace orrery::report
