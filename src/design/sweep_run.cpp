#include "design/sweep_run.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace orrery::design {

SweepWork plan_sweep_work(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                          const std::vector<uint8_t>& stored) {
  SweepWork work;
  std::map<std::string, size_t> unit_of;
  for (const SweepPoint& point : points) {
    if (point.id < stored.size() && stored[point.id] != 0) {
      ++work.stored;
      continue;
    }
    if (std::optional<PointResult> decided = precheck_point(spec, point)) {
      work.decided.push_back(std::move(*decided));
      continue;
    }
    const auto [it, inserted] = unit_of.emplace(workload_key(spec, point), work.units.size());
    if (inserted) work.units.emplace_back();
    work.units[it->second].push_back(point.id);
  }
  return work;
}

void run_units(const SweepSpec& spec, const std::vector<SweepPoint>& points, size_t threads,
               const std::function<std::vector<uint64_t>()>& next,
               const std::function<void(std::vector<PointResult>)>& done) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  auto work = [&]() {
    while (true) {
      const std::vector<uint64_t> ids = next();
      if (ids.empty()) return;
      std::vector<const SweepPoint*> unit;
      unit.reserve(ids.size());
      for (uint64_t id : ids) unit.push_back(&points[id]);
      done(evaluate_unit(spec, unit, 1));
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

Expected<SweepProgress> run_sweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                  SweepStore& store, const SweepRunOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  Expected<std::vector<uint8_t>> stored = store.stored();
  if (!stored) return stored.error();
  SweepWork work = plan_sweep_work(spec, points, *stored);

  SweepProgress progress;
  progress.total = points.size();
  progress.stored = work.stored;
  progress.done = work.stored;
  for (const std::vector<uint64_t>& unit : work.units) progress.to_simulate += unit.size();
  auto count = [&](const std::vector<PointResult>& results, bool simulated) {
    for (const PointResult& r : results) {
      ++progress.done;
      if (simulated) ++progress.simulated;
      switch (r.status) {
        case PointStatus::kOk:
          ++progress.ok;
          break;
        case PointStatus::kRejected:
          ++progress.rejected;
          break;
        case PointStatus::kFailed:
          ++progress.failed;
          break;
      }
    }
  };
  // The decided points first, in batches (one transaction each).
  constexpr size_t kBatch = 4096;
  for (size_t from = 0; from < work.decided.size(); from += kBatch) {
    const std::vector<PointResult> batch(
        work.decided.begin() + static_cast<std::ptrdiff_t>(from),
        work.decided.begin() +
            static_cast<std::ptrdiff_t>(std::min(from + kBatch, work.decided.size())));
    if (Status s = store.write(points, batch); !s) return s.error();
    count(batch, false);
  }

  std::mutex mutex;
  std::condition_variable wake;
  size_t next_unit = 0;
  size_t units_done = 0;
  bool stop = false;
  std::deque<std::vector<PointResult>> finished;
  auto next = [&]() -> std::vector<uint64_t> {
    std::lock_guard<std::mutex> lock(mutex);
    if (stop || next_unit >= work.units.size()) return {};
    return work.units[next_unit++];
  };
  auto done = [&](std::vector<PointResult> results) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished.push_back(std::move(results));
    }
    wake.notify_one();
  };
  std::thread pool([&]() { run_units(spec, points, options.threads, next, done); });

  Status failure = Status::ok();
  double last_report = -1;
  while (true) {
    if (options.remote != nullptr && failure) {
      if (Status s = options.remote->poll(next, done); !s) {
        failure = s;
        std::lock_guard<std::mutex> lock(mutex);
        stop = true;
      }
    }
    std::deque<std::vector<PointResult>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait_for(lock, std::chrono::milliseconds(options.remote != nullptr ? 2 : 100),
                    [&]() { return !finished.empty(); });
      batch.swap(finished);
    }
    std::vector<PointResult> results;
    for (std::vector<PointResult>& unit : batch) {
      for (PointResult& r : unit) results.push_back(std::move(r));
    }
    if (!results.empty() && failure) {
      if (Status s = store.write(points, results); !s) {
        failure = s;
        std::lock_guard<std::mutex> lock(mutex);
        stop = true;
      }
    }
    count(results, true);
    units_done += batch.size();
    progress.seconds = seconds();
    const bool all_done = units_done >= work.units.size() &&
                          (options.remote == nullptr || options.remote->finished());
    if (options.progress && (progress.seconds - last_report >= 0.2 || all_done)) {
      options.progress(progress);
      last_report = progress.seconds;
    }
    if (all_done || !failure) break;  // after a failure, only the units in progress finish
  }
  pool.join();
  if (!failure) return failure.error();
  return progress;
}

}  // namespace orrery::design
