// sim/jobs.h: several jobs on one network (`orrery run --jobs jobs.yaml`, docs/formats/jobs.md).
//
// Each job is its own workload, system file and communicator groups, placed on NPUs of one graph
// topology (its rank r runs on placement[r]) and started at its own time. The jobs share one event
// engine and one network backend: each job's collective engine and executor work in the job's
// own ranks, and a thin adapter (JobNetwork) turns its ranks into NPUs and its message tokens into
// tokens tagged with the job, so that every message of every job meets every other on the links.
// A job's logical layout (the dimensions its collectives are planned over) is the graph's, cut to
// the job's size (whole inner dimensions, then the remainder).
//
// Results: per job its iteration (last finish minus start), compute and exposed communication,
// and its slowdown against running alone on the same network (each job is also run alone, so a
// jobs file of n jobs costs n + 1 simulations); per link the bytes of the shared run and which
// jobs crossed it (from the alone runs: NPUs belong to one job each, so a pair's messages take
// the same routes alone and shared). Jobs are simulated rank by rank (no fast path).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/trace_set.h"
#include "core/error.h"
#include "network/graph_yaml.h"
#include "network/network_backend.h"
#include "sim/scenario.h"
#include "system/system_config.h"
#include "workload/executor.h"

namespace orrery::sim {

struct JobSpec {
  std::string name;
  std::string workload;              // trace prefix, relative to the jobs file
  std::string system;                // system JSON, relative to the jobs file
  std::string comm_groups;           // "" = only METADATA groups
  std::vector<net::Rank> placement;  // NPU of each job rank
  SimTime start;
  int line = 0;
};

struct JobsFile {
  std::string file;
  std::string network;  // relative to the jobs file
  std::string backend = "flow";
  std::vector<JobSpec> jobs;
};

// Reads a jobs file (every key checked, errors FILE:LINE). Placements are checked against each
// other when the network is known (load_jobs).
Expected<JobsFile> parse_jobs_file(std::string_view text, std::string_view file_name);

// One job ready to run: its scenario (traces, groups, system, checked against its own ranks) and
// where it runs.
struct Job {
  JobSpec spec;
  std::shared_ptr<const Scenario> scenario;
};

struct Jobs {
  std::string file;
  std::string network_name;
  std::shared_ptr<const net::NetworkDescription> network;  // the shared graph
  std::string backend;
  RunSettings settings;  // of every job (backend, timing)
  std::vector<Job> jobs;
};

// Reads the jobs file and every job's inputs; checks that the network is a graph topology, that
// placements name distinct NPUs of it, one per job rank, and that no two jobs share an NPU.
Expected<Jobs> load_jobs(const std::filesystem::path& path, RunSettings settings);

struct JobResult {
  std::string name;
  uint32_t ranks = 0;
  SimTime start;
  SimTime iteration;  // the last finish minus the start
  SimTime alone;      // the same, running alone
  double slowdown = 1.0;
  SimTime compute_mean;  // accelerator compute per rank
  SimTime exposed_mean;  // iteration minus compute, per rank
  std::vector<workload::RankResult> ranks_detail;
};

struct JobLink {
  net::LinkStats stats;                // of the shared run
  std::string src, dst;                // node names
  std::vector<uint32_t> jobs;          // indices of the jobs whose messages crossed it
  std::vector<uint64_t> bytes_by_job;  // by index in `jobs`, from the alone runs
};

struct JobsResult {
  std::vector<JobResult> jobs;
  std::vector<JobLink> links;  // every link the shared run used, by link id
  SimTime end;
  uint64_t events = 0;
  uint64_t messages = 0;
};

// Runs every job together, then each alone. Errors name the job (a deadlock, a bad trace).
Expected<JobsResult> run_jobs(const Jobs& jobs);

}  // namespace orrery::sim
