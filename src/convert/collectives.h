// convert/collectives.h: what a PyTorch communication op moves, read from the host trace.
//
// A collective appears in a host trace as a small call tree:
//   c10d::allreduce_ (the Python-level call)
//     record_param_comms (metadata: collective name, message sizes, dtype, process group)
//       nccl:all_reduce (the launch of the NCCL kernel; its inputs are the tensors sent)
// Other backends name their op the same way (gloo:all_reduce under c10d::allreduce_, without
// record_param_comms in PyTorch 1.13). describe_communication() reads one such op and its
// neighbours into a CommSpec: the kind
// (collective, send or receive), the Chakra collective type, the bytes (from the tensors, as
// num_elem x elem_bytes), the process group and, for point-to-point ops, the peer and tag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convert/host_trace.h"
#include "convert/kineto_trace.h"
#include "et_def.pb.h"

namespace orrery::convert {

enum class CommKind : uint8_t { kCollective, kSend, kRecv };

// An op of a c10d backend that runs the communication: "nccl:all_reduce" (ProcessGroupNCCL),
// "gloo:all_reduce" (ProcessGroupGloo), "mpi:..." and "ucc:..." (ProcessGroupMPI and UCC). Each
// sits under its c10d call (c10d::allreduce_) and carries the tensors sent.
bool is_backend_comm_op(std::string_view name);
// An op of a communication's own call: its backend op, the c10d call above it ("c10d::*") or the
// record_param_comms between them.
bool is_comm_call(std::string_view name);

struct CommName {
  CommKind kind = CommKind::kCollective;
  ChakraProtoMsg::CollectiveCommType type = ChakraProtoMsg::ALL_REDUCE;  // for collectives
};

// The communication a name stands for: "nccl:all_reduce", "gloo:broadcast", "allreduce",
// "all_to_allv",
// "_allgather_base", "reduce_scatter_tensor", "broadcast", "nccl:send", ... Matching ignores case,
// '_' and '-'. nullopt for names that move no data by themselves ("wait", "coalesced").
std::optional<CommName> comm_name(std::string_view name);

// Element bytes of a dtype as record_param_comms writes it ("Float" 4, "BFloat16" 2, ...); 0 when
// unknown.
uint64_t dtype_bytes(std::string_view dtype);

struct CommSpec {
  CommName name;
  uint64_t bytes = 0;
  std::string size_source;  // "nccl op tensors", "record_param_comms in_msg_nelems", ...
  std::string pg_name;      // "" when the trace does not say (the whole job)
  // Point-to-point: the peer as a rank of the process group, and as a global rank when the trace
  // gives the group's rank layout (global_rank_start, global_rank_stride).
  std::optional<int64_t> peer_group_rank;
  std::optional<int64_t> peer_global_rank;
  int64_t tag = 0;
};

// The collective name a record_param_comms op carries: its `collective_name` attribute (1.1.x),
// else its first text input (1.0.1 to 1.0.3 list it among the inputs). nullopt when neither.
std::optional<std::string> record_param_comms_name(const HostTrace& trace, const HostOp& op);

// Describes the communication of host op `op_index` (a backend op such as `nccl:*` or `gloo:*`, or
// record_param_comms when the trace has no backend op under it). `kernel`, when given, is the op's
// NCCL kernel: its args
// ("Process Group Name", "In msg nelems", "dtype") fill what the host trace leaves out. nullopt
// when the op's name does not name a communication.
std::optional<CommSpec> describe_communication(const HostTrace& trace, size_t op_index,
                                               const KinetoEvent* kernel);

// Which c10d call each backend op ran for. A call (c10d::allreduce_) and its backend op
// (gloo:all_reduce) share their tensors, and the op should sit under the call; but PyTorch 1.13's
// observer files an asynchronous Gloo op under whatever scope is open when it starts (often the
// next call) and can leave out the last one (it starts after the iteration's marker closed):
// in a recorded DDP step, rank 0's second call holds the first call's op and its own op is not
// in the trace. So a backend op pairs with the call it sits under when they share a tensor
// ((tensor id, storage id) of the inputs), else with the latest unpaired call before it that
// shares one; calls that move no data (names comm_name() does not know) pair with nothing.
// A call with tensors that no backend op pairs with and no record_param_comms sits under (which
// describes it, as in PyTorch 2's traces) stands for its communication itself.
struct CallPairing {
  std::vector<std::optional<size_t>> backend_of;  // per op index: a call's backend op
  std::vector<std::optional<size_t>> call_of;     // per op index: a backend op's call
  std::vector<bool> filed_elsewhere;              // per op index: paired, not under its call
  std::vector<bool> stands_alone;                 // per op index: such a call
};
CallPairing pair_comm_calls(const HostTrace& trace);

}  // namespace orrery::convert
