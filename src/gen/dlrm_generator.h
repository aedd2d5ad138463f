// gen/dlrm_generator.h: Chakra traces of one training iteration of a DLRM recommendation model.
//
// A DlrmModel is dense features through a bottom MLP, sparse features looked up in embedding tables
// (rows, a common dimension d, a pooling factor: lookups per sample summed into one vector), a dot
// interaction of the bottom MLP's output with every pooled embedding, and a top MLP ending in one
// logit (Naumov et al., 2019). Presets name the MLPerf DLRM (Criteo 1TB) and the Criteo Kaggle
// model; a JSON file describes any other.
//
// The plan is N ranks and a global batch B (b = B / N samples per rank). The MLPs are data-parallel
// (every rank runs its b samples and the dense gradients are all-reduced over all ranks); the
// embedding tables are model-parallel, sharded table-wise (table t on rank t mod N), row-wise
// (every table split into N row blocks) or column-wise (every table split into N column blocks of
// d / N). Per iteration each rank runs: the indices all-to-all (each rank's sparse features to the
// shards that own them), the lookup on its shards, the output distribution (all-to-all of pooled
// embeddings; row-wise: reduce-scatter of partial sums), the bottom MLP, the interaction, the top
// MLP and the loss; backward in reverse with the gradient distribution (all-to-all; row-wise:
// all-gather), the fused embedding backward and SGD update on the touched rows, and per MLP layer
// the gradient all-reduce and the SGD step. docs/models/workloads.md states the sizes as closed
// forms; the tests check them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gen/dlrm_shard_plan.h"
#include "gen/llm_generator.h"
#include "gen/memory_estimate.h"
#include "gen/rank_program.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

struct EmbeddingTable {
  uint64_t rows = 0;
  uint32_t pooling = 1;  // lookups per sample, sum-pooled
};

struct DlrmModel {
  std::string name;
  uint32_t dense_features = 0;
  std::vector<uint32_t> bottom_mlp;  // output width of every layer; the last equals dim
  std::vector<uint32_t> top_mlp;     // output width of every layer; the last is the logit (1)
  uint32_t dim = 0;                  // embedding dimension d
  std::vector<EmbeddingTable> tables;
  DType dtype = DType::kFp32;

  // Width of the top MLP's input: the bottom output and the (T + 1) T / 2 pairwise dot products.
  uint64_t interaction_width() const;
  // Parameters of the MLPs (weights and biases), held by every rank.
  uint64_t dense_parameters() const;
  // Rows x d over every table.
  uint64_t embedding_parameters() const;
  // Sum of the pooling factors: indices per sample.
  uint64_t lookups_per_sample() const;
};

// Errors name the field ("bottom_mlp ends in 256 but dim is 128").
Status validate_dlrm_model(const DlrmModel& model);
const std::vector<DlrmModel>& dlrm_presets();
// A preset by name, or a JSON model file (docs/models/workloads.md) when `name_or_path` names an
// existing file or ends in ".json".
Expected<DlrmModel> resolve_dlrm_model(std::string_view name_or_path);
// {"base": "dlrm-mlperf", "tables": 8 | [rows, ...], "rows": R, "pooling": P | [...], "dim": d,
//  "dense_features": n, "bottom_mlp": [...], "top_mlp": [...], "dtype": "fp16", "name": ...}.
Expected<DlrmModel> load_dlrm_file(const std::string& path);

enum class Sharding : uint8_t { kTable, kRow, kColumn };
// "table", "row" or "column" (also "table-wise", ...).
Expected<Sharding> parse_sharding(std::string_view name);
std::string_view sharding_name(Sharding sharding);

struct DlrmPlan {
  uint32_t ranks = 1;
  uint64_t global_batch = 0;
  Sharding sharding = Sharding::kTable;
  // When set, the tables and their shards are the placement's (`sharding` is not used): every
  // table as the plan splits it, on the ranks it names (DlrmGenerator::create takes the tables
  // from it).
  std::shared_ptr<const DlrmShardPlan> placement;

  uint64_t local_batch() const { return global_batch / ranks; }
};

// Errors name the flag ("--global-batch 1000 is not a multiple of --ranks 16").
Status validate_dlrm_plan(const DlrmModel& model, const DlrmPlan& plan);

// Bytes of one index (int64, as PyTorch's embedding bags take them).
inline constexpr uint64_t kIndexBytes = 8;

// Communication of one rank per iteration (every rank has the same sizes; 0: not written).
struct DlrmComm {
  uint64_t index_all_to_all = 0;  // forward: indices to the shards, per-rank buffer
  uint64_t output_dist = 0;       // forward: all-to-all (reduce-scatter row-wise) of pooled vectors
  uint64_t grad_dist = 0;         // backward: all-to-all (all-gather row-wise) of their gradients
  ChakraProtoMsg::CollectiveCommType output_type = ChakraProtoMsg::ALL_TO_ALL;
  ChakraProtoMsg::CollectiveCommType grad_type = ChakraProtoMsg::ALL_TO_ALL;
  std::vector<uint64_t> mlp_all_reduce;  // per MLP layer (bottom then top): its gradient bytes
};
DlrmComm dlrm_comm(const DlrmModel& model, const DlrmPlan& plan);

// The tables (and for row/column sharding the share of each) one rank holds.
struct TableShard {
  uint32_t table = 0;
  uint64_t rows = 0;     // rows held
  uint32_t dim = 0;      // columns held
  uint64_t lookups = 0;  // lookups per iteration on this shard (row-wise: the expected B P / N)
  uint64_t outputs = 0;  // pooled vectors written (B: every sample of the global batch)
};
std::vector<TableShard> table_shards(const DlrmModel& model, const DlrmPlan& plan, uint32_t rank);

// With a placement, the communication of one rank differs from its peers': the bytes it sends to
// and receives from every rank (index 0..N-1; 0 to itself) per exchange, and its collectives
// (0: not written). Gradients go back the way pooled embeddings came: the backward exchange sends
// output_from[q] to q and receives output_to[q] from q.
struct DlrmPlacedComm {
  std::vector<uint64_t> index_to;     // forward: indices to the shards' ranks
  std::vector<uint64_t> index_from;   // forward: indices of the shards this rank holds
  std::vector<uint64_t> output_to;    // forward: pooled vectors of this rank's shards
  std::vector<uint64_t> output_from;  // forward: pooled vectors of the rank's own samples
  uint64_t host_reduce_scatter = 0;   // TWRW: partial sums within the host (the whole buffer)
  uint64_t host_all_gather = 0;       // TWRW backward: per-rank input
  uint64_t row_reduce_scatter = 0;    // RW: partial sums over every rank (the whole buffer)
  uint64_t row_all_gather = 0;        // RW backward: per-rank input
  uint64_t dp_all_reduce = 0;         // DP tables' gradients
  uint32_t host_group = 0;            // communicator group of the rank's host (TWRW collectives)
};
DlrmPlacedComm dlrm_placed_comm(const DlrmModel& model, const DlrmPlan& plan, uint32_t rank);

// Memory of every rank (StageMemory::stage is the rank): embedding shards and MLP weights, dense
// gradients, no optimizer state (SGD, as MLPerf's DLRM), activations of one iteration.
std::vector<StageMemory> estimate_dlrm_memory(const DlrmModel& model, const DlrmPlan& plan);

class DlrmGenerator {
 public:
  static Expected<DlrmGenerator> create(DlrmModel model, DlrmPlan plan);

  const DlrmModel& model() const { return model_; }
  const DlrmPlan& plan() const { return plan_; }
  uint32_t ranks() const { return plan_.ranks; }

  // The program of one rank; thread-safe.
  RankProgram build(uint32_t rank) const;

 private:
  DlrmGenerator(DlrmModel model, DlrmPlan plan) : model_(std::move(model)), plan_(plan) {}

  DlrmModel model_;
  DlrmPlan plan_;
};

// Writes <prefix>.<rank>.et for every rank and <prefix>.json (group 1: every rank, when N > 1).
Expected<GeneratedTraces> write_dlrm_traces(const DlrmGenerator& generator,
                                            const std::string& prefix,
                                            const RankFileOptions& options);
// The same trace set in memory, named `name`.
Expected<BuiltTraces> build_dlrm_traces(const DlrmGenerator& generator, const std::string& name,
                                        const RankFileOptions& options);

}  // namespace orrery::gen
