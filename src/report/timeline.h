// report/timeline.h: a run as a Chrome / Perfetto trace (ui.perfetto.dev, chrome://tracing).
//
// One process per rank ("rank 3"); threads are tracks: accelerator compute, host CPU,
// collectives, sends, receives and memory, each split into as many lanes as it needs so that
// slices on one track never overlap without nesting. A slice carries the node's name, id and,
// for communication, its collective type, bytes and group. For big runs only the ranks of a
// RankSet are recorded, which bounds the file.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/rank_set.h"
#include "workload/executor.h"

namespace orrery::report {

class TimelineRecorder final : public workload::RunObserver {
 public:
  explicit TimelineRecorder(RankSet ranks) : ranks_(std::move(ranks)) {}

  void on_activity(const workload::ActivityRecord& record,
                   const chakra::TraceGraph& graph) override;

  // After a symmetric run (one representative rank simulated for all): gives every recorded rank
  // below `ranks` rank 0's slices.
  void replicate_representative(uint32_t ranks);

  // Writes the trace (JSON object format, "traceEvents", times in us). After the run.
  Status write(const std::string& path) const;
  size_t slices() const { return slices_.size(); }

 private:
  struct Slice {
    workload::ActivityRecord record;
    std::string name;
    std::string args;  // a JSON object, already serialized
  };
  RankSet ranks_;
  std::vector<Slice> slices_;
};

}  // namespace orrery::report
