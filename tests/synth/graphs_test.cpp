// Graph sets (LayerDAG's TPU Tile benchmark): the reader's answers to bad input, the layer order,
// the statistics, and train / sample / eval on a subset of the real TPU Tile graphs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"
#include "synth/graph_synthesizer.h"
#include "synth/graphs.h"
#include "synth/layers.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace graphs_test {

namespace fs = std::filesystem;

const std::string kTile = std::string(ORRERY_TEST_DATA_DIR) + "/layerdag/";

std::string write_text(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

std::string graph_file(const test::TempDir& dir, const std::string& graphs) {
  return write_text(dir, "g.json",
                    R"({"format": "orrery graph set 1", "categories": 4, "label": "runtime", )"
                    R"("graphs": [{"x": [0, 1], "edges": [[0, 1]], "y": 1.5}, )" +
                        graphs + "]}");
}

std::string read_error(const std::string& path) {
  Expected<GraphSet> set = read_graph_set(path);
  return set ? std::string("(read)") : set.error().message();
}

TEST(GraphSet, bad_graphs_are_named_by_file_graph_and_what_is_wrong) {
  test::TempDir dir;
  const std::string path = dir.file("g.json");
  struct Case {
    const char* graph;
    const char* message;
  };
  for (const Case& c : {
           Case{R"({"x": [0, 1, 2], "edges": [[0, 5]], "y": 1})",
                "graph 1 edge 0 [0,5] names node 5 of 3"},
           Case{R"({"x": [0, 1, 2], "edges": [[0, 1], [1, 2], [2, 0]], "y": 1})",
                "graph 1 node 0 is on or behind a cycle"},
           Case{R"({"x": [0, 1], "edges": [[1, 1]], "y": 1})",
                "graph 1 edge 0 [1,1] is a self-loop"},
           Case{R"({"x": [0, 4], "y": 1})",
                "graph 1 node 1: category 4 is not an integer in 0 .. 3"},
           Case{R"({"x": [0, -1], "y": 1})", "graph 1 node 1: category -1"},
           Case{R"({"x": [], "y": 1})", "graph 1 has no nodes"},
           Case{R"({"x": [0, 1]})", "graph 1 has no finite label \"y\" (runtime)"},
           Case{R"({"x": [0, 1], "edges": [[0]], "y": 1})", "graph 1 edge 0 [0] is not a pair"},
           Case{R"([0, 1])", "graph 1 is not an object"},
       }) {
    graph_file(dir, c.graph);
    const std::string message = read_error(path);
    EXPECT_NE(message.find(path + ": " + c.message), std::string::npos)
        << c.graph << " -> " << message;
  }
  EXPECT_NE(read_error(write_text(dir, "n.json", "{\"format\": ")).find("not JSON"),
            std::string::npos);
  EXPECT_NE(read_error(write_text(dir, "f.json", R"({"graphs": []})")).find("not a graph set"),
            std::string::npos);
  // A format that is not a string (a fuzzer's find: it was an uncaught exception).
  EXPECT_NE(read_error(write_text(dir, "g7.json", R"({"format": 7, "graphs": []})"))
                .find("not a graph set"),
            std::string::npos);
  EXPECT_NE(read_error(write_text(dir, "c.json",
                                  R"({"format": "orrery graph set 1", )"
                                  R"("categories": 0, "graphs": []})"))
                .find("\"categories\" must be an integer in 1 .. 65535"),
            std::string::npos);
  EXPECT_NE(read_error(dir.file("absent.json")).find("absent.json: cannot open"),
            std::string::npos);
}

TEST(GraphSet, a_lenient_read_skips_bad_graphs_and_merges_duplicate_edges) {
  test::TempDir dir;
  const std::string path =
      graph_file(dir, R"({"x": [0, 1, 2], "edges": [[0, 2], [0, 2], [1, 2]], "y": 2}, )"
                      R"({"x": [0, 9], "y": 3})");
  GraphSetIssues issues;
  Expected<GraphSet> set = read_graph_set(path, &issues);
  ASSERT_TRUE(set) << set.error().message();
  ASSERT_EQ(set->graphs.size(), 2u);
  EXPECT_EQ(issues.invalid, 1u);
  ASSERT_EQ(issues.reasons.size(), 1u);
  EXPECT_NE(issues.reasons[0].find("graph 2 node 1: category 9"), std::string::npos);
  EXPECT_EQ(issues.duplicate_edges, 1u);
  const std::vector<std::pair<uint32_t, uint32_t>> merged = {{0, 2}, {1, 2}};
  EXPECT_EQ(set->graphs[1].edges, merged);
  EXPECT_EQ(set->graphs[1].y, 2.0);

  // Written and read back: the same graphs.
  ASSERT_TRUE(write_graph_set(dir.file("back.json"), *set));
  Expected<GraphSet> back = read_graph_set(dir.file("back.json"));
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->graphs.size(), 2u);
  EXPECT_EQ(back->label, "runtime");
  for (size_t idx = 0; idx < 2; ++idx) {
    EXPECT_EQ(back->graphs[idx].x, set->graphs[idx].x);
    EXPECT_EQ(back->graphs[idx].edges, set->graphs[idx].edges);
    EXPECT_EQ(back->graphs[idx].y, set->graphs[idx].y);
  }
}

TEST(GraphSet, encoding_orders_nodes_by_kahn_layer_and_keeps_categories) {
  // Sources 2 and 3; 0 waits for 3; 1 waits for 0 and 2. Layers {2, 3}, {0}, {1}.
  LabelledGraph graph;
  graph.x = {10, 11, 12, 13};
  graph.edges = {{0, 1}, {2, 1}, {3, 0}};
  const EncodedDag encoded = encode_graph(graph);
  const std::vector<uint32_t> starts = {0, 2, 3, 4};
  EXPECT_EQ(encoded.layer_start, starts);
  ASSERT_EQ(encoded.size(), 4u);
  EXPECT_EQ(encoded.x[0][0], 12);
  EXPECT_EQ(encoded.x[1][0], 13);
  EXPECT_EQ(encoded.x[2][0], 10);
  EXPECT_EQ(encoded.x[3][0], 11);
  for (const NodeClasses& node : encoded.x) {
    for (size_t attr = 1; attr < kAttrCount; ++attr) EXPECT_EQ(node[attr], 0);
  }
  const std::vector<std::pair<uint32_t, uint32_t>> edges = {{0, 3}, {1, 2}, {2, 3}};
  EXPECT_EQ(encoded.edges, edges);
  const LabelledGraph decoded = decode_graph(encoded, 4.5);
  const std::vector<uint32_t> categories = {12, 13, 10, 11};
  EXPECT_EQ(decoded.x, categories);
  EXPECT_EQ(decoded.edges, edges);
  EXPECT_EQ(decoded.y, 4.5);

  const auto stats = labelled_graph_statistics(encoded, 16);
  const Histogram& category = stats.at("category");
  ASSERT_EQ(category.size(), 16u);
  for (uint32_t cls = 10; cls < 14; ++cls) EXPECT_DOUBLE_EQ(category[cls], 0.25);
  // Layers of sizes 2, 1, 1; in-degrees 0, 0, 1, 2.
  EXPECT_DOUBLE_EQ(stats.at("layer_size")[0], 2.0 / 3);
  EXPECT_DOUBLE_EQ(stats.at("layer_size")[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(stats.at("in_degree")[0], 0.5);
  EXPECT_DOUBLE_EQ(stats.at("in_degree")[2], 0.25);
  EXPECT_FALSE(stats.contains("collective_mix"));
}

GraphTrainSettings tiny(const std::string& graphs) {
  GraphTrainSettings settings;
  settings.graphs = graphs;
  settings.window = 160;
  settings.sizes = test::tiny_sizes();
  settings.training.steps = 6;
  settings.training.batch = 8;
  settings.training.eval_every = 3;
  return settings;
}

TEST(GraphSynthesizer, tpu_tile_train_sample_eval_end_to_end_and_deterministic) {
  test::TempDir dir;
  const std::string train = kTile + "tpu_tile_val_every15.json";
  const std::string test_set = kTile + "tpu_tile_test_every15.json";
  // The subset's figures, counted from the file itself.
  Expected<GraphSet> real_train = read_graph_set(train);
  ASSERT_TRUE(real_train) << real_train.error().message();
  uint64_t nodes = 0;
  for (const LabelledGraph& graph : real_train->graphs) nodes += graph.x.size();

  Expected<GraphTrainSummary> first = train_graph_model(tiny(train), dir.file("a.pt"), {});
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->graphs, 42u);
  EXPECT_EQ(first->categories, 47u);
  EXPECT_EQ(first->nodes, nodes);
  ASSERT_TRUE(train_graph_model(tiny(train), dir.file("b.pt"), {}));
  EXPECT_EQ(read_whole_file(dir.file("a.pt")), read_whole_file(dir.file("b.pt")));
  Expected<bool> graph_model = is_graph_model(dir.file("a.pt"));
  ASSERT_TRUE(graph_model);
  EXPECT_TRUE(*graph_model);

  // Without a count: one graph per training label, in order, each carrying its label.
  GraphSampleSettings sample;
  sample.model = dir.file("a.pt");
  sample.output = dir.file("s.json");
  sample.seed = 3;
  Expected<GraphSampleSummary> sampled = sample_graphs(sample, {});
  ASSERT_TRUE(sampled) << sampled.error().message();
  EXPECT_EQ(sampled->graphs, 42u);
  Expected<GraphSet> synthetic = read_graph_set(dir.file("s.json"));  // strict: every graph valid
  ASSERT_TRUE(synthetic) << synthetic.error().message();
  ASSERT_EQ(synthetic->graphs.size(), 42u);
  EXPECT_EQ(synthetic->categories, 47u);
  EXPECT_EQ(synthetic->label, "normalized runtime");
  for (size_t idx = 0; idx < 42; ++idx) {
    EXPECT_EQ(synthetic->graphs[idx].y, real_train->graphs[idx].y) << idx;
    EXPECT_LE(synthetic->graphs[idx].x.size(), 160u);
    // Generated layer by layer: the encoded order is the Kahn order, so every edge runs forward.
    const EncodedDag encoded = encode_graph(synthetic->graphs[idx]);
    EXPECT_EQ(decode_graph(encoded, 0).edges, synthetic->graphs[idx].edges) << idx;
  }
  sample.output = dir.file("s2.json");
  ASSERT_TRUE(sample_graphs(sample, {}));
  EXPECT_EQ(read_whole_file(dir.file("s.json")), read_whole_file(dir.file("s2.json")));
  sample.output = dir.file("t.json");
  sample.count = 5;
  sample.target = 7.25;
  sample.baseline = true;
  ASSERT_TRUE(sample_graphs(sample, {}));
  Expected<GraphSet> targeted = read_graph_set(dir.file("t.json"));
  ASSERT_TRUE(targeted);
  ASSERT_EQ(targeted->graphs.size(), 5u);
  for (const LabelledGraph& graph : targeted->graphs) EXPECT_EQ(graph.y, 7.25);

  GraphEvalSettings eval;
  eval.model = dir.file("a.pt");
  eval.real = test_set;
  eval.synthetic = dir.file("s.json");
  eval.reference = train;
  eval.surrogate_options.steps = 20;
  eval.surrogate_options.hidden = 16;
  Expected<GraphEvalReport> report = evaluate_graphs(eval, {});
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->validity, 1.0);
  EXPECT_EQ(report->baseline_validity, 1.0);
  EXPECT_EQ(report->real_graphs, 43u);
  EXPECT_EQ(report->synthetic_graphs, 42u);
  EXPECT_EQ(report->baseline_samples, 42u);
  const nlohmann::json json = graph_eval_to_json(*report);
  for (const char* stat : {"layer_size", "in_degree", "out_degree", "nodes", "depth", "category"}) {
    ASSERT_TRUE(json["mmd"].contains(stat)) << stat;
    EXPECT_GE(json["mmd"][stat]["model"].get<double>(), 0.0);
  }
  EXPECT_EQ(json["mmd"].size(), 6u);
  EXPECT_EQ(json["surrogate"]["label"], "normalized runtime");
  EXPECT_TRUE(json["surrogate"]["real_training"].contains("pearson"));

  // The real held-out set as its own "synthetic" set: every distance is zero.
  eval.synthetic = test_set;
  eval.surrogate = false;
  Expected<GraphEvalReport> self = evaluate_graphs(eval, {});
  ASSERT_TRUE(self) << self.error().message();
  for (const auto& [name, pair] : self->mmd) EXPECT_NEAR(pair.first, 0.0, 1e-12) << name;
  EXPECT_FALSE(graph_eval_to_json(*self).contains("surrogate"));
}

TEST(GraphSynthesizer, an_unconditioned_model_samples_unlabelled_graphs_and_takes_no_target) {
  test::TempDir dir;
  GraphTrainSettings settings = tiny(kTile + "tpu_tile_val_every15.json");
  settings.condition = false;
  ASSERT_TRUE(train_graph_model(settings, dir.file("u.pt"), {}));
  GraphSampleSettings sample;
  sample.model = dir.file("u.pt");
  sample.output = dir.file("u.json");
  sample.count = 4;
  ASSERT_TRUE(sample_graphs(sample, {}));
  Expected<GraphSet> set = read_graph_set(dir.file("u.json"));
  ASSERT_TRUE(set) << set.error().message();
  EXPECT_EQ(set->graphs.size(), 4u);
  EXPECT_EQ(set->label, "");
  sample.target = 3.0;
  Expected<GraphSampleSummary> targeted = sample_graphs(sample, {});
  ASSERT_FALSE(targeted);
  EXPECT_NE(targeted.error().message().find("trained without labels"), std::string::npos);

  GraphEvalSettings eval;
  eval.model = dir.file("u.pt");
  eval.real = kTile + "tpu_tile_test_every15.json";
  eval.synthetic = dir.file("u.json");
  Expected<GraphEvalReport> report = evaluate_graphs(eval, {});
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->validity, 1.0);
  EXPECT_FALSE(report->surrogate);  // the samples carry no label to learn
}

TEST(GraphSynthesizer, the_command_line_names_what_is_wrong) {
  test::TempDir dir;
  const std::string bad = graph_file(dir, R"({"x": [0, 1, 2], "edges": [[0, 5]], "y": 1})");
  CommandResult train = run_orrery({"synth", "train", "--graphs", bad, "-o", dir.file("m.pt")});
  EXPECT_EQ(train.exit_code, 1);
  EXPECT_NE(train.err.find(bad + ": graph 1 edge 0 [0,5] names node 5 of 3"), std::string::npos)
      << train.err;

  CommandResult both = run_orrery(
      {"synth", "train", "--graphs", bad, "--corpus", dir.file(""), "-o", dir.file("m.pt")});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("exactly one of --corpus DIR"), std::string::npos) << both.err;

  const std::string big = graph_file(dir, R"({"x": [0, 1, 2, 3], "y": 1})");
  CommandResult window =
      run_orrery({"synth", "train", "--graphs", big, "-o", dir.file("m.pt"), "--window", "3"});
  EXPECT_EQ(window.exit_code, 1);
  EXPECT_NE(window.err.find("graph 1 has 4 nodes, more than the window of 3"), std::string::npos)
      << window.err;

  // A model file whose format is not a string is refused, not a crash.
  const std::string odd =
      write_text(dir, "odd.pt", "orrery-synth-model 1\n{\"format\": 7, \"tensors\": []}\n");
  CommandResult odd_model = run_orrery({"synth", "sample", "--model", odd, "-o", dir.file("o")});
  EXPECT_EQ(odd_model.exit_code, 1);
  EXPECT_NE(odd_model.err.find(odd + ": not a LayerDAG model"), std::string::npos) << odd_model.err;

  // A graph-set model: the trace targets are refused, the label target is taken.
  const std::string tile = kTile + "tpu_tile_val_every15.json";
  CommandResult trained = run_orrery({"synth", "train", "--graphs", tile, "-o", dir.file("m.pt"),
                                      "--steps", "2", "--hidden", "8", "--heads", "2", "-q"});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("42 graphs"), std::string::npos) << trained.out;
  CommandResult wrong_target = run_orrery({"synth", "sample", "--model", dir.file("m.pt"), "-o",
                                           dir.file("s.json"), "--target-time", "5ms"});
  EXPECT_EQ(wrong_target.exit_code, 1);
  EXPECT_NE(wrong_target.err.find("a graph-set model takes --target-label"), std::string::npos)
      << wrong_target.err;
  CommandResult ranks = run_orrery(
      {"synth", "sample", "--model", dir.file("m.pt"), "-o", dir.file("s.json"), "--ranks", "4"});
  EXPECT_EQ(ranks.exit_code, 1);
  EXPECT_NE(
      ranks.err.find(dir.file("m.pt") + ", a graph-set model, takes no trace option (--ranks)"),
      std::string::npos)
      << ranks.err;
  CommandResult bins = run_orrery(
      {"synth", "train", "--graphs", tile, "-o", dir.file("n.pt"), "--bins", "4", "--ranks", "2"});
  EXPECT_EQ(bins.exit_code, 1);
  EXPECT_NE(bins.err.find("a graph set (--graphs) takes no trace option (--bins, --ranks)"),
            std::string::npos)
      << bins.err;
  CommandResult sampled = run_orrery({"synth", "sample", "--model", dir.file("m.pt"), "-o",
                                      dir.file("s.json"), "-n", "3", "--target-label", "2"});
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_NE(sampled.out.find("wrote 3 graphs"), std::string::npos) << sampled.out;
  CommandResult eval = run_orrery({"synth", "eval", "--model", dir.file("m.pt"), "--real", big,
                                   "--synthetic", dir.file("s.json"), "--json"});
  EXPECT_EQ(eval.exit_code, 1);
  EXPECT_NE(eval.err.find(big + ": 4 categories, the model has 47"), std::string::npos) << eval.err;
}

}  // namespace graphs_test
}  // namespace orrery::synth
