// Partitioning methods on small networks with known answers: closed-form traffic and FLOPs of the
// contiguous split, budgets that hold, and a hidden block structure that only RePurpose finds.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "partition/assignment.h"
#include "partition/inference_trace.h"
#include "partition/partitioner.h"
#include "partition/study.h"

namespace orrery::partition {
namespace partitioner_test {

Matrix gaussian(int64_t rows, int64_t cols, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  Matrix m(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) m(r, c) = normal(rng);
  }
  return m;
}

Layer dense(Matrix weight, Vector bias) {
  Layer l;
  l.kind = LayerKind::kDense;
  l.name = "fc";
  l.weight = std::move(weight);
  l.bias = std::move(bias);
  return l;
}

Layer relu() {
  Layer l;
  l.kind = LayerKind::kRelu;
  return l;
}

// 6 -> 8 -> relu -> 8 -> relu -> 4, dense random weights.
Model dense_model(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Model m;
  m.source = "dense";
  m.input = {6, 1, 1};
  m.layers = {dense(gaussian(8, 6, rng), gaussian(8, 1, rng, 0.1)), relu(),
              dense(gaussian(8, 8, rng), gaussian(8, 1, rng, 0.1)), relu(),
              dense(gaussian(4, 8, rng), gaussian(4, 1, rng, 0.1))};
  EXPECT_TRUE(finish_model(m));
  return m;
}

// The same shape with a hidden structure: two blocks per layer, units of a block connected only
// to units of the same block, and blocks interleaved so that the contiguous split cuts them all.
Model block_model(uint64_t seed) {
  Model m = dense_model(seed);
  auto block = [](int64_t unit) { return (unit * 5 + 1) % 8 < 4 ? 0 : 1; };  // 4 units each
  auto out_block = [](int64_t unit) { return unit == 0 || unit == 3 ? 0 : 1; };
  for (int64_t j = 0; j < 8; ++j) {
    for (int64_t i = 0; i < 8; ++i) {
      if (block(j) != block(i)) m.layers[2].weight(j, i) = 0.0;
    }
  }
  for (int64_t o = 0; o < 4; ++o) {
    for (int64_t j = 0; j < 8; ++j) {
      if (out_block(o) != block(j)) m.layers[4].weight(o, j) = 0.0;
    }
  }
  return m;
}

Dataset labelled(const Model& model, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Dataset d;
  d.source = "synthetic";
  d.features = gaussian(rows, model.input.features(), rng);
  const std::vector<int64_t> best = argmax_rows(forward(model, d.features));
  d.labels.assign(best.begin(), best.end());
  return d;
}

Partition run(Partitioner& p, Method method, int32_t workers, double keep, bool per_pair = false) {
  PartitionOptions options;
  options.workers = workers;
  options.keep = keep;
  options.per_pair = per_pair;
  Expected<Partition> part = p.run(method, options);
  EXPECT_TRUE(part) << part.error().message();
  return *part;
}

TEST(Partitioner, contiguous_split_is_exact_with_closed_form_traffic_and_flops) {
  const Model model = dense_model(1);
  const Dataset data = labelled(model, 100, 2);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p) << p.error().message();
  const Partition part = run(*p, Method::kContiguous, 2, 1.0);
  EXPECT_LT((forward(part.model, data.features) - forward(model, data.features)).norm(), 1e-12);
  // Layer 1 reads the input every worker has; layers 2 and 3 need the 4 activations of the other
  // worker on each worker; outputs 2 and 3 go to worker 0 at the end: 8 + 8 + 2 values.
  ASSERT_EQ(part.layers.size(), 3u);
  EXPECT_DOUBLE_EQ(part.layers[0].traffic.sum(), 0.0);
  EXPECT_DOUBLE_EQ(part.layers[1].traffic(0, 1), 4.0);
  EXPECT_DOUBLE_EQ(part.layers[1].traffic(1, 0), 4.0);
  EXPECT_DOUBLE_EQ(part.layers[2].traffic.sum(), 8.0);
  EXPECT_EQ(part.gather, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(part.traffic_values(), 18);
  EXPECT_EQ(p->full_traffic(2), (std::vector<int64_t>{0, 8, 8}));
  // Each worker: 4 x 6 + 4 x 8 + 2 x 8 multiply-adds.
  EXPECT_EQ(part.flops_per_worker(), (std::vector<int64_t>{144, 144}));
  EXPECT_EQ(part.layers[1].local_macs, (std::vector<int64_t>{16, 16}));
}

TEST(Partitioner, budgets_hold_in_total_and_per_worker_pair) {
  const Model model = dense_model(3);
  const Dataset data = labelled(model, 120, 4);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p);
  const std::vector<int64_t> full = p->full_traffic(3);
  for (Method method : {Method::kRepurpose, Method::kMagnitude, Method::kRandom, Method::kRefit}) {
    for (double keep : {0.0, 0.3, 0.6}) {
      const Partition total = run(*p, method, 3, keep);
      for (size_t l = 0; l < total.layers.size(); ++l) {
        EXPECT_LE(total.layers[l].traffic.sum(),
                  std::floor(keep * static_cast<double>(full[l])) + 1e-9)
            << method_name(method) << " keep " << keep << " layer " << l;
      }
      const Partition pair = run(*p, method, 3, keep, true);
      for (size_t l = 1; l < pair.layers.size(); ++l) {
        // Each worker holds 3, 3 and 2 of the previous layer's 8 units.
        for (int32_t a = 0; a < 3; ++a) {
          const double held = static_cast<double>(std::count(
              pair.layers[l - 1].placement.begin(), pair.layers[l - 1].placement.end(), a));
          for (int32_t b = 0; b < 3; ++b) {
            EXPECT_LE(pair.layers[l].traffic(a, b), std::floor(keep * held) + 1e-9)
                << method_name(method) << " keep " << keep << " layer " << l;
          }
        }
      }
    }
  }
}

TEST(Partitioner, with_no_budget_no_activation_crosses_workers) {
  const Model model = dense_model(5);
  const Dataset data = labelled(model, 80, 6);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p);
  for (Method method : {Method::kRepurpose, Method::kMagnitude, Method::kRandom, Method::kRefit}) {
    const Partition part = run(*p, method, 2, 0.0);
    for (const LayerPlan& plan : part.layers) EXPECT_DOUBLE_EQ(plan.traffic.sum(), 0.0);
    for (const LayerPlan& plan : part.layers) {
      EXPECT_EQ(worker_sizes(plan.placement, 2),
                (std::vector<int64_t>{static_cast<int64_t>(plan.placement.size() / 2),
                                      static_cast<int64_t>(plan.placement.size() / 2)}));
    }
  }
}

TEST(Partitioner, repurpose_finds_a_hidden_block_structure_the_baselines_cut) {
  const Model model = block_model(7);
  const Dataset calibration = labelled(model, 200, 8);
  const Dataset test = labelled(model, 300, 9);
  Expected<Partitioner> p = Partitioner::make(model, calibration.features);
  ASSERT_TRUE(p);
  // Without any cross-worker activation, the placement of the blocks keeps the outputs exact.
  const Partition repurpose = run(*p, Method::kRepurpose, 2, 0.0);
  EXPECT_LT((forward(repurpose.model, test.features) - forward(model, test.features))
                .cwiseAbs()
                .maxCoeff(),
            1e-6);
  EXPECT_DOUBLE_EQ(accuracy(forward(repurpose.model, test.features), test.labels), 1.0);
  // The units of one block share a worker.
  const auto& hidden = repurpose.layers[1].placement;
  for (int64_t j = 0; j < 8; ++j) {
    const bool same_block = ((j * 5 + 1) % 8 < 4) == ((1 * 5 + 1) % 8 < 4);
    EXPECT_EQ(hidden[static_cast<size_t>(j)] == hidden[1], same_block) << "unit " << j;
  }
  // The contiguous split needs every block-crossing activation; pruned to nothing, it is wrong.
  const Partition contiguous = run(*p, Method::kContiguous, 2, 1.0);
  EXPECT_GT(contiguous.layers[1].traffic.sum() + contiguous.layers[2].traffic.sum(), 8.0);
  const Partition magnitude = run(*p, Method::kMagnitude, 2, 0.0);
  EXPECT_GT((forward(magnitude.model, test.features) - forward(model, test.features))
                .cwiseAbs()
                .maxCoeff(),
            0.1);
}

TEST(Partitioner, runs_are_deterministic_and_random_placements_follow_the_seed) {
  const Model model = dense_model(10);
  const Dataset data = labelled(model, 90, 11);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p);
  const Partition a = run(*p, Method::kRepurpose, 2, 0.4);
  const Partition b = run(*p, Method::kRepurpose, 2, 0.4);
  for (size_t i = 0; i < a.model.layers.size(); ++i) {
    EXPECT_EQ(a.model.layers[i].weight, b.model.layers[i].weight);
  }
  PartitionOptions options;
  options.workers = 2;
  options.keep = 0.5;
  const Partition r1 = *p->run(Method::kRandom, options);
  options.seed = 2;
  const Partition r2 = *p->run(Method::kRandom, options);
  EXPECT_NE(r1.layers[1].placement, r2.layers[1].placement);
  EXPECT_EQ(r1.layers[1].placement,
            p->run(Method::kRandom, {2, 0.5, false, 1e-3, 3, 1})->layers[1].placement);
}

TEST(Study, operating_points_are_the_least_traffic_within_the_accuracy_drop) {
  const Model model = block_model(7);
  const Dataset calibration = labelled(model, 200, 8);
  const Dataset test = labelled(model, 300, 9);
  Expected<Partitioner> p = Partitioner::make(model, calibration.features);
  ASSERT_TRUE(p);
  StudyOptions options;
  options.partition.workers = 2;
  options.grid_points = 5;
  Expected<Study> study = run_study(*p, 200, test, options);
  ASSERT_TRUE(study) << study.error().message();
  EXPECT_DOUBLE_EQ(study->unpartitioned_accuracy, 1.0);
  const MethodStudy* repurpose = study->find(Method::kRepurpose);
  ASSERT_NE(repurpose, nullptr);
  EXPECT_TRUE(repurpose->within_drop);
  EXPECT_EQ(repurpose->operating.traffic_values, 2);  // only outputs 1 and 2 go to worker 0
  const MethodStudy* contiguous = study->find(Method::kContiguous);
  EXPECT_DOUBLE_EQ(contiguous->operating.accuracy, 1.0);
  EXPECT_EQ(contiguous->curve.size(), 1u);
  for (Method m : {Method::kRandom, Method::kMagnitude}) {
    const MethodStudy* ms = study->find(m);
    for (const Evaluation& e : ms->curve) {
      // The operating point has the least traffic of the points that hold the accuracy.
      if (e.accuracy >= 0.99 - 1e-12) {
        EXPECT_GE(e.traffic_values, ms->operating.traffic_values);
      }
    }
  }
  const nlohmann::json json = study_json(*study);
  for (const char* name : {"repurpose", "contiguous", "random", "magnitude"}) {
    ASSERT_TRUE(json["methods"].contains(name)) << name;
    for (const char* key : {"accuracy", "traffic_bytes", "flops_per_worker"}) {
      EXPECT_TRUE(json["methods"][name].contains(key)) << name << " " << key;
    }
  }
  EXPECT_EQ(json["methods"]["repurpose"]["traffic_bytes"], 8);
  EXPECT_DOUBLE_EQ(json["unpartitioned_accuracy"].get<double>(), 1.0);
  EXPECT_NE(study_svg(*study, "t").find("<polyline"), std::string::npos);
}

TEST(Study, test_labels_beyond_the_models_outputs_are_errors_naming_the_line) {
  const Model model = dense_model(3);
  const Dataset calibration = labelled(model, 40, 4);
  Expected<Partitioner> p = Partitioner::make(model, calibration.features);
  ASSERT_TRUE(p);
  Expected<Dataset> test =
      parse_csv_dataset("a,b,c,d,e,f,label\n0,0,0,0,0,0,3\n\n1,1,1,1,1,1,4\n", "t.csv");
  ASSERT_TRUE(test) << test.error().message();
  StudyOptions options;
  options.keep = 1.0;
  Expected<Study> study = run_study(*p, 40, *test, options);
  ASSERT_FALSE(study);
  EXPECT_EQ(study.error().message(),
            "t.csv:4: label 4, but the model has 4 outputs (classes 0 to 3)");
  // A dataset built in code has no lines: the message names the row.
  Dataset built = labelled(model, 5, 6);
  built.labels[2] = 7;
  study = run_study(*p, 40, built, options);
  ASSERT_FALSE(study);
  EXPECT_EQ(study.error().message(),
            "synthetic: row 3: label 7, but the model has 4 outputs (classes 0 to 3)");
}

TEST(Partitioner, workers_range_from_one_to_the_widest_layers_units) {
  // dense_model's widest layers have 8 units: 8 workers hold one unit each of them, 9 would leave
  // one idle in every layer.
  const Model model = dense_model(7);
  const Dataset data = labelled(model, 40, 8);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p) << p.error().message();
  const Partition eight = run(*p, Method::kRepurpose, 8, 0.5);
  EXPECT_EQ(eight.layers[1].placement.size(), 8u);
  EXPECT_EQ(worker_sizes(eight.layers[1].placement, 8), std::vector<int64_t>(8, 1));
  PartitionOptions options;
  options.workers = 9;
  Expected<Partition> nine = p->run(Method::kRepurpose, options);
  ASSERT_FALSE(nine);
  EXPECT_EQ(nine.error().message(),
            "9 workers but the widest layer of dense has 8 units: some worker would hold "
            "nothing in any layer");
  options.workers = 0;
  ASSERT_FALSE(p->run(Method::kContiguous, options));
  EXPECT_EQ(p->check_workers(0).error().message(), "0 workers: at least 1");
  // The study refuses before it computes anything.
  StudyOptions study_options;
  study_options.partition.workers = 9;
  Expected<Study> study = run_study(*p, 40, data, study_options);
  ASSERT_FALSE(study);
  EXPECT_EQ(study.error().message(), nine.error().message());
}

TEST(InferenceTrace, traces_carry_each_layers_sends_receives_and_compute_and_validate_strictly) {
  const Model model = dense_model(1);
  const Dataset data = labelled(model, 50, 2);
  Expected<Partitioner> p = Partitioner::make(model, data.features);
  ASSERT_TRUE(p);
  const Partition part = run(*p, Method::kContiguous, 2, 1.0);
  const auto dir = std::filesystem::temp_directory_path() / "orrery-partition-trace-test";
  std::filesystem::remove_all(dir);
  TraceOptions options;
  options.batch = 3;
  Expected<std::vector<std::string>> paths =
      write_inference_traces(part, (dir / "inference").string(), options);
  ASSERT_TRUE(paths) << paths.error().message();
  ASSERT_EQ(paths->size(), 2u);
  uint64_t sent = 0, received = 0, flops = 0;
  for (const std::string& path : *paths) {
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    ASSERT_TRUE(graph) << graph.error().message();
    EXPECT_TRUE(chakra::validate_trace(*graph).passes(chakra::ValidationMode::kStrict)) << path;
    for (chakra::NodeIndex n = 0; n < graph->size(); ++n) {
      const auto size = graph->get_int(n, "comm_size");
      const auto ops = graph->get_int(n, "num_ops");
      if (graph->type(n) == ChakraProtoMsg::COMM_SEND_NODE) sent += static_cast<uint64_t>(**size);
      if (graph->type(n) == ChakraProtoMsg::COMM_RECV_NODE)
        received += static_cast<uint64_t>(**size);
      if (graph->type(n) == ChakraProtoMsg::COMP_NODE) flops += static_cast<uint64_t>(**ops);
    }
  }
  // 18 values of 4 bytes for each of 3 inferences, sent and received; 2 x 144 FLOPs, 3 times.
  EXPECT_EQ(sent, 18u * 4u * 3u);
  EXPECT_EQ(received, sent);
  EXPECT_EQ(flops, 2u * 144u * 3u);
  std::filesystem::remove_all(dir);
}

}  // namespace partitioner_test
}  // namespace orrery::partition
