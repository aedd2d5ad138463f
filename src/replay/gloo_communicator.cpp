// The one file of orrery that includes Gloo: the collectives library libtorch's own CPU backend
// (ProcessGroupGloo) runs on, here over its TCP transport, with processes that meet through a
// FileStore.
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <string_view>

#include "replay/communicator.h"

namespace orrery::replay {

namespace {

// As long as c10d's default for a process group: a rank may wait this long for the slowest to
// reach a collective (building a large trace's operators takes seconds), not forever.
constexpr std::chrono::minutes kTimeout(30);

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The sum of a type, by element size: integers add as unsigned of their width (the same bits in
// two's complement, without signed overflow); 16-bit floats as 16-bit integers and complex
// numbers as pairs of their parts, as the MPI communicator does: the same bytes and work.
struct Reduction {
  ReduceFn fn = nullptr;
  uint64_t element = 1;
};

Reduction reduction(DType type) {
  switch (type) {
    case DType::kFloat:
    case DType::kComplexFloat:
      return {&gloo::sum<float>, 4};
    case DType::kDouble:
    case DType::kComplexDouble:
      return {&gloo::sum<double>, 8};
    case DType::kHalf:
    case DType::kBFloat16:
    case DType::kInt16:
      return {&gloo::sum<uint16_t>, 2};
    case DType::kInt8:
    case DType::kUInt8:
      return {&gloo::sum<uint8_t>, 1};
    case DType::kBool:
      return {&gloo::max<uint8_t>, 1};
    case DType::kInt32:
      return {&gloo::sum<uint32_t>, 4};
    case DType::kInt64:
      return {&gloo::sum<uint64_t>, 8};
  }
  return {&gloo::sum<uint8_t>, 1};
}

// Gloo's typed options take the element type as a template argument; the reduction's element
// size picks it.
template <typename Body>
void with_element(uint64_t element, Body&& body) {
  switch (element) {
    case 8:
      body(uint64_t{});
      break;
    case 4:
      body(uint32_t{});
      break;
    case 2:
      body(uint16_t{});
      break;
    default:
      body(uint8_t{});
  }
}

std::string group_key(const std::vector<uint32_t>& ranks) {
  return fmt::format("group:{}", fmt::join(ranks, ","));
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(uint32_t rank, uint32_t size, const std::string& store_dir,
                   const std::string& hostname)
      : rank_(rank), size_(size), store_(store_dir) {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    device_ = gloo::transport::tcp::CreateDevice(attr);
    std::vector<uint32_t> world(size);
    std::iota(world.begin(), world.end(), 0U);
    world_ = connect(world, rank);
  }

  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  std::string description() const override {
    return fmt::format("Gloo {}.{}.{} (TCP), {} processes", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                       GLOO_VERSION_PATCH, size_);
  }
  bool serialized_threads() const override { return true; }

  Status prepare_groups(const std::vector<std::vector<uint32_t>>& groups) override {
    return guarded("connecting its groups", [&] {
      for (const std::vector<uint32_t>& ranks : groups) {
        if (contexts_.count(ranks) != 0) continue;
        if (ranks.size() == size_) {
          contexts_[ranks] = world_;
          continue;
        }
        const auto mine = std::find(ranks.begin(), ranks.end(), rank_);
        if (mine == ranks.end()) continue;
        contexts_[ranks] = connect(ranks, static_cast<uint32_t>(mine - ranks.begin()));
      }
    });
  }

  Status run(const CommRequest& request) override {
    const auto found = contexts_.find(*request.group);
    if (found == contexts_.end()) {
      return Error::make(ErrorKind::kInvalidArgument, "no Gloo context for ranks {}",
                         fmt::join(*request.group, ","));
    }
    try {
      execute(found->second, request);
    } catch (const std::exception& error) {  // described here, not before every operation
      return failure(fmt::format("{} of {} bytes", comm_op_name(request.kind), request.bytes),
                     error);
    }
    return Status::ok();
  }

  Status barrier() override {
    return guarded("barrier", [&] {
      gloo::BarrierOptions options(world_);
      options.setTag(next_tag(world_));
      gloo::barrier(options);
    });
  }

  Expected<std::vector<std::string>> all_gather_text(const std::string& mine) override {
    std::vector<std::string> texts;
    Status done = guarded("all-gather of the ranks' reports", [&] {
      uint64_t length = mine.size();
      std::vector<uint64_t> lengths(size_, 0);
      gloo::AllgatherOptions sizes(world_);
      sizes.setInput(&length, 1);
      sizes.setOutput(lengths.data(), lengths.size());
      sizes.setTag(next_tag(world_));
      gloo::allgather(sizes);
      std::string all(std::accumulate(lengths.begin(), lengths.end(), uint64_t{0}), '\0');
      gloo::AllgathervOptions texts_options(world_);
      // Gloo reads the input even when it is empty; a zero-length text still has a valid pointer.
      texts_options.setInput(const_cast<char*>(mine.data()), mine.size());
      texts_options.setOutput(all.data(), std::vector<size_t>(lengths.begin(), lengths.end()));
      texts_options.setTag(next_tag(world_));
      gloo::allgatherv(texts_options);
      size_t at = 0;
      for (const uint64_t length_of : lengths) {
        texts.push_back(all.substr(at, length_of));
        at += length_of;
      }
    });
    if (!done) return done.error();
    return texts;
  }

 private:
  // A full mesh of TCP pairs among `ranks`, met in the store under the group's own prefix.
  std::shared_ptr<gloo::Context> connect(const std::vector<uint32_t>& ranks, uint32_t index) {
    gloo::rendezvous::PrefixStore prefixed(group_key(ranks), store_);
    auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(index),
                                                               static_cast<int>(ranks.size()));
    context->setTimeout(kTimeout);
    context->connectFullMesh(prefixed, device_);
    return context;
  }

  // Each context numbers its operations: every member issues the same ones in the same order, so
  // the numbers agree, and an operation's messages never match another's.
  uint32_t next_tag(const std::shared_ptr<gloo::Context>& context) {
    return tags_[context.get()]++;
  }

  // Gloo reports a peer gone, a timeout or a misuse by throwing.
  static Error failure(std::string_view what, const std::exception& error) {
    return Error::make(ErrorKind::kInvalidArgument, "Gloo {} failed: {}", what, error.what());
  }

  template <typename Body>
  Status guarded(std::string_view what, Body&& body) {
    try {
      body();
    } catch (const std::exception& error) {
      return failure(what, error);
    }
    return Status::ok();
  }

  unsigned char* scratch(uint64_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  void execute(const std::shared_ptr<gloo::Context>& context, const CommRequest& request) {
    const uint64_t n = request.group->size();
    // Only the group's collectives count: a send or receive involves two of its members.
    const bool point_to_point =
        request.kind == CommOpKind::kSend || request.kind == CommOpKind::kRecv;
    const uint32_t tag = point_to_point ? 0 : next_tag(context);
    const Reduction sum = reduction(request.dtype);
    auto* send = static_cast<unsigned char*>(request.send);
    auto* recv = static_cast<unsigned char*>(request.recv);
    const int root = static_cast<int>(request.root);
    switch (request.kind) {
      case CommOpKind::kAllReduce:
        with_element(sum.element, [&](auto type) {
          using T = decltype(type);
          gloo::AllreduceOptions options(context);
          options.setOutput(reinterpret_cast<T*>(send), request.bytes / sizeof(T));
          options.setReduceFunction(sum.fn);
          options.setTag(tag);
          gloo::allreduce(options);
        });
        break;
      case CommOpKind::kBroadcast: {
        gloo::BroadcastOptions options(context);
        options.setOutput(send, request.bytes);
        options.setRoot(root);
        options.setTag(tag);
        gloo::broadcast(options);
        break;
      }
      case CommOpKind::kAllGather: {
        gloo::AllgatherOptions options(context);
        options.setInput(send, request.bytes);
        options.setOutput(recv, request.bytes * n);
        options.setTag(tag);
        gloo::allgather(options);
        break;
      }
      case CommOpKind::kReduceScatter: {
        // Gloo has no reduce-scatter: the direct algorithm, each rank's block to its owner (an
        // all-to-all, (n - 1) / n of the input on the wire as a ring sends) and a local sum.
        const uint64_t block = request.bytes / n;
        unsigned char* blocks = scratch(block * n);
        gloo::AlltoallOptions options(context);
        options.setInput(send, block * n);
        options.setOutput(blocks, block * n);
        options.setTag(tag);
        gloo::alltoall(options);
        const size_t count = block / sum.element;
        std::memcpy(recv, blocks, block);
        for (uint64_t from = 1; from < n; ++from) sum.fn(recv, recv, blocks + from * block, count);
        break;
      }
      case CommOpKind::kAllToAll:
        if (request.send_bytes.empty()) {
          const uint64_t block = request.bytes / n;
          gloo::AlltoallOptions options(context);
          options.setInput(send, block * n);
          options.setOutput(recv, block * n);
          options.setTag(tag);
          gloo::alltoall(options);
        } else {
          gloo::AlltoallvOptions options(context);
          options.setInput(
              send, std::vector<int64_t>(request.send_bytes.begin(), request.send_bytes.end()));
          options.setOutput(
              recv, std::vector<int64_t>(request.recv_bytes.begin(), request.recv_bytes.end()));
          options.setTag(tag);
          gloo::alltoallv(options);
        }
        break;
      case CommOpKind::kReduce:
        with_element(sum.element, [&](auto type) {
          using T = decltype(type);
          const size_t count = request.bytes / sizeof(T);
          gloo::ReduceOptions options(context);
          options.setInput(reinterpret_cast<T*>(send), count);
          // Gloo reduces into the output on every rank, the root's being the result.
          options.setOutput(reinterpret_cast<T*>(recv != nullptr ? recv : scratch(request.bytes)),
                            count);
          options.setRoot(root);
          options.setReduceFunction(sum.fn);
          options.setTag(tag);
          gloo::reduce(options);
        });
        break;
      case CommOpKind::kGather: {
        gloo::GatherOptions options(context);
        options.setInput(send, request.bytes);
        if (context->rank == root) options.setOutput(recv, request.bytes * n);
        options.setRoot(root);
        options.setTag(tag);
        gloo::gather(options);
        break;
      }
      case CommOpKind::kScatter: {
        const uint64_t block = request.bytes / n;
        gloo::ScatterOptions options(context);
        if (context->rank == root) {
          std::vector<unsigned char*> parts;
          for (uint64_t part = 0; part < n; ++part) parts.push_back(send + part * block);
          options.setInputs(parts, block);
        }
        options.setOutput(recv, block);
        options.setRoot(root);
        options.setTag(tag);
        gloo::scatter(options);
        break;
      }
      case CommOpKind::kBarrier: {
        gloo::BarrierOptions options(context);
        options.setTag(tag);
        gloo::barrier(options);
        break;
      }
      case CommOpKind::kSend:
      case CommOpKind::kRecv: {
        // Point to point on the world's pairs, matched by (peer, tag) in order as MPI matches
        // them; a slot without a collective's prefix byte, so never one of theirs.
        const uint64_t slot = static_cast<uint32_t>(request.tag);
        const bool sending = request.kind == CommOpKind::kSend;
        std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
            world_->createUnboundBuffer(sending ? request.send : request.recv, request.bytes);
        if (sending) {
          buffer->send(static_cast<int>(request.peer), slot);
          buffer->waitSend(kTimeout);
        } else {
          buffer->recv(static_cast<int>(request.peer), slot);
          buffer->waitRecv(kTimeout);
        }
        break;
      }
    }
  }

  uint32_t rank_;
  uint32_t size_;
  gloo::rendezvous::FileStore store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> world_;
  std::map<std::vector<uint32_t>, std::shared_ptr<gloo::Context>> contexts_;
  std::map<const gloo::Context*, uint32_t> tags_;
  std::vector<unsigned char> scratch_;
};

}  // namespace

Expected<std::unique_ptr<Communicator>> make_gloo_communicator(uint32_t rank, uint32_t size,
                                                               const std::string& store_dir,
                                                               const std::string& hostname) {
  if (size == 0 || rank >= size) {
    return Error::make(ErrorKind::kInvalidArgument, "Gloo: rank {} is not one of {} processes",
                       rank, size);
  }
  try {
    return std::unique_ptr<Communicator>(new GlooCommunicator(rank, size, store_dir, hostname));
  } catch (const std::exception& error) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "rank {}: Gloo cannot connect the {} processes (store {}): {}", rank, size,
                       store_dir, error.what());
  }
}

}  // namespace orrery::replay
