#include "network/dimension_failures.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/units.h"

namespace orrery::net {

DimensionFailures::DimensionFailures(const Topology& topology,
                                     std::vector<DimensionFailure> failures)
    : topology_(topology), failures_(std::move(failures)) {
  std::stable_sort(
      failures_.begin(), failures_.end(),
      [](const DimensionFailure& a, const DimensionFailure& b) { return a.at < b.at; });
}

bool DimensionFailures::applies(const DimensionFailure& failure, const LinkInfo& info) const {
  if (failure.dimension != info.dimension) return false;
  // A switch's end of a link is not an NPU: only the NPU end names it.
  auto listed = [&](NodeId node) {
    return !topology_.is_switch(node) && failure.ranks.contains(node);
  };
  return listed(info.src) || listed(info.dst);
}

double DimensionFailures::surviving(LinkId link, SimTime now) const {
  if (failures_.empty() || failures_.front().at > now) return 1.0;
  const LinkInfo info = topology_.link_info(link);
  double left = 1.0;
  for (const DimensionFailure& failure : failures_) {
    if (failure.at > now) break;
    if (applies(failure, info)) left = std::min(left, failure.surviving);
  }
  return left;
}

Bandwidth DimensionFailures::bandwidth(LinkId link, Bandwidth bandwidth, SimTime now) const {
  const double left = surviving(link, now);
  return left == 1.0 ? bandwidth : bandwidth.scaled(left);
}

const DimensionFailure* DimensionFailures::cut_by(LinkId link, SimTime now) const {
  if (failures_.empty() || failures_.front().at > now) return nullptr;
  const LinkInfo info = topology_.link_info(link);
  for (const DimensionFailure& failure : failures_) {
    if (failure.at > now) break;
    if (failure.surviving == 0 && applies(failure, info)) return &failure;
  }
  return nullptr;
}

std::vector<std::string> describe_undelivered(const std::vector<Undelivered>& held, size_t most) {
  std::vector<std::string> lines;
  for (size_t k = 0; k < held.size() && k < most; ++k) {
    const Undelivered& message = held[k];
    const std::string from =
        message.src == kNoRank ? std::string("a message") : fmt::format("rank {}", message.src);
    lines.push_back(fmt::format(
        "undeliverable: {} -> rank {}, {} bytes: {} failed at {} ns with nothing surviving", from,
        message.dst, format_count(message.bytes),
        message.failure != nullptr ? message.failure->what : std::string("a link"),
        format_count(static_cast<uint64_t>(
            message.failure != nullptr ? message.failure->at.ns_truncated() : 0))));
  }
  if (held.size() > most) {
    lines.push_back(
        fmt::format("... and {} more undeliverable messages", format_count(held.size() - most)));
  }
  return lines;
}

}  // namespace orrery::net
