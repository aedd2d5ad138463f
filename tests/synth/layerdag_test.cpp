#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "synth/layerdag.h"
#include "synth/layers.h"
#include "synth/metrics.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace layerdag_test {

// A small corpus: chains of compute nodes of different lengths ending in an all-reduce, and
// two-wide ladders; labels = scaled length.
std::vector<TrainingGraph> corpus(Codebook& book) {
  std::vector<Dag> dags;
  for (uint32_t length = 1; length <= 6; ++length)
    dags.push_back(test::chain_with_all_reduce(length));
  for (uint32_t rungs = 2; rungs <= 4; ++rungs) {
    Dag dag;
    for (uint32_t rung = 0; rung < rungs; ++rung) {
      dag.nodes.push_back(test::compute(1000, 64));
      dag.nodes.push_back(test::collective(NodeKind::kAllGather, 4096, {2, 1}));
      if (rung > 0) {
        dag.edges.emplace_back(2 * rung - 2, 2 * rung);
        dag.edges.emplace_back(2 * rung - 1, 2 * rung + 1);
        dag.edges.emplace_back(2 * rung - 2, 2 * rung + 1);
      }
    }
    normalize_edges(dag);
    dags.push_back(dag);
  }
  book = Codebook::fit(dags, {});
  std::vector<TrainingGraph> out;
  for (const Dag& dag : dags) {
    out.push_back({encode_dag(layer_dag(dag), book), {static_cast<float>(dag.size()) / 12.0f}});
  }
  return out;
}

LayerDagConfig tiny_config(const Codebook& book, const std::vector<TrainingGraph>& graphs) {
  LayerDagConfig config;
  config.hidden = 16;
  config.mpnn_layers = 1;
  config.attr_embed = 4;
  config.level_embed = 4;
  config.label_embed = 4;
  config.time_embed = 4;
  config.heads = 2;
  config.node_steps = 4;
  config.edge_steps = 3;
  config.classes = book.class_counts();
  uint64_t nodes = 0;
  for (size_t a = 0; a < kAttrCount; ++a) config.marginals[a].assign(config.classes[a], 0.0);
  for (const TrainingGraph& graph : graphs) {
    config.max_layers = std::max(config.max_layers, graph.graph.layers());
    for (uint32_t layer = 0; layer < graph.graph.layers(); ++layer) {
      config.max_layer_size = std::max(config.max_layer_size, graph.graph.layer_start[layer + 1] -
                                                                  graph.graph.layer_start[layer]);
    }
    for (const NodeClasses& x : graph.graph.x) {
      ++nodes;
      for (size_t a = 0; a < kAttrCount; ++a) config.marginals[a][x[a]] += 1;
    }
  }
  for (auto& marginal : config.marginals) {
    for (double& value : marginal) value /= static_cast<double>(nodes);
  }
  config.labels = 1;
  config.max_nodes = 16;
  config.mean_in_degree = 1.3;
  return config;
}

TrainOptions tiny_training() {
  TrainOptions options;
  options.steps = 12;
  options.batch = 8;
  options.eval_every = 6;
  options.seed = 5;
  return options;
}

TEST(LayerDag, trains_and_samples_graphs_that_respect_the_window_and_the_corpus_classes) {
  Codebook book;
  const std::vector<TrainingGraph> graphs = corpus(book);
  const LayerDagConfig config = tiny_config(book, graphs);
  LayerDag model = LayerDag::create(config, 3);
  Expected<std::vector<ModuleReport>> reports = model.train(graphs, tiny_training());
  ASSERT_TRUE(reports) << reports.error().message();
  ASSERT_EQ(reports->size(), 3u);
  for (const ModuleReport& report : *reports) {
    EXPECT_EQ(report.steps, 12u);
    EXPECT_TRUE(std::isfinite(report.validation_loss)) << module_name(report.module);
  }
  SampleOptions options;
  options.batch = 4;
  options.ranks = 4;
  const std::vector<EncodedDag> samples =
      model.sample(std::vector<std::vector<float>>(6, {0.5f}), options);
  ASSERT_EQ(samples.size(), 6u);
  for (const EncodedDag& sample : samples) {
    ASSERT_GE(sample.size(), 1u);
    EXPECT_LE(sample.size(), config.max_nodes);
    EXPECT_LE(sample.layers(), config.max_layers);
    EXPECT_EQ(sample.ranks, 4u);
    std::vector<uint32_t> parents(sample.size(), 0);
    for (const auto& [parent, child] : sample.edges) {
      EXPECT_LT(parent, child);
      ++parents[child];
    }
    // Past the first layer every node has a parent in the layer before, so the layers generated
    // are the sample's Kahn layers.
    Dag shape;
    shape.nodes.resize(sample.size());
    shape.edges = sample.edges;
    const std::vector<uint32_t> level = kahn_levels(shape);
    for (uint32_t layer = 0; layer < sample.layers(); ++layer) {
      for (uint32_t node = sample.layer_start[layer]; node < sample.layer_start[layer + 1]; ++node)
        EXPECT_EQ(level[node], layer) << "node " << node;
    }
    for (uint32_t node = 0; node < sample.size(); ++node) {
      if (node >= sample.layer_start[1]) {
        EXPECT_GE(parents[node], 1u);
      }
      for (size_t a = 0; a < kAttrCount; ++a) {
        ASSERT_LT(sample.x[node][a], config.classes[a]);
        // Only classes the corpus has.
        EXPECT_GT(config.marginals[a][sample.x[node][a]], 0.0) << attr_name(static_cast<Attr>(a));
      }
    }
  }
}

// A size that does not fit in the window ends the graph (as training windows end), rather than
// being drawn again among the sizes that fit; the first layer is never empty.
TEST(LayerDag, a_layer_that_does_not_fit_ends_the_graph) {
  Rng rng(7);
  for (int draw = 0; draw < 20; ++draw) {
    EXPECT_EQ(draw_layer_size({0.0, 0.0, 0.0, 1.0}, 2, false, rng), 0u);
    EXPECT_EQ(draw_layer_size({0.0, 0.0, 0.0, 1.0}, 3, false, rng), 3u);
    EXPECT_EQ(draw_layer_size({0.5, 0.0, 0.5}, 8, true, rng), 2u);
    const uint32_t size = draw_layer_size({0.0, 0.5, 0.0, 0.5}, 2, false, rng);
    EXPECT_TRUE(size == 0 || size == 1) << size;
  }
  EXPECT_EQ(draw_layer_size({1.0}, 8, true, rng), 0u) << "nothing but an empty layer: the end";
}

TEST(LayerDag, the_same_seed_gives_the_same_weights_and_samples) {
  Codebook book;
  const std::vector<TrainingGraph> graphs = corpus(book);
  const LayerDagConfig config = tiny_config(book, graphs);
  auto run = [&](uint64_t seed) {
    LayerDag model = LayerDag::create(config, seed);
    TrainOptions options = tiny_training();
    options.seed = seed;
    EXPECT_TRUE(model.train(graphs, options));
    SampleOptions sampling;
    sampling.seed = seed;
    return std::make_pair(model.weights(),
                          model.sample(std::vector<std::vector<float>>(3, {0.25f}), sampling));
  };
  const auto a = run(9), b = run(9), c = run(10);
  ASSERT_EQ(a.first.size(), b.first.size());
  bool all_same = true, any_differs = false;
  for (size_t idx = 0; idx < a.first.size(); ++idx) {
    all_same = all_same && a.first[idx].values == b.first[idx].values;
    any_differs = any_differs || a.first[idx].values != c.first[idx].values;
  }
  EXPECT_TRUE(all_same);
  EXPECT_TRUE(any_differs);
  for (size_t idx = 0; idx < a.second.size(); ++idx) {
    EXPECT_EQ(a.second[idx].x, b.second[idx].x);
    EXPECT_EQ(a.second[idx].edges, b.second[idx].edges);
  }
}

TEST(LayerDag, weights_reload_into_a_fresh_model_and_sample_alike) {
  Codebook book;
  const std::vector<TrainingGraph> graphs = corpus(book);
  const LayerDagConfig config = tiny_config(book, graphs);
  LayerDag trained = LayerDag::create(config, 1);
  ASSERT_TRUE(trained.train(graphs, tiny_training()));
  LayerDag fresh = LayerDag::create(config, 2);
  ASSERT_TRUE(fresh.load_weights(trained.weights()));
  const std::vector<std::vector<float>> labels(4, {0.75f});
  const auto x = trained.sample(labels, {}), y = fresh.sample(labels, {});
  for (size_t idx = 0; idx < x.size(); ++idx) {
    EXPECT_EQ(x[idx].x, y[idx].x);
    EXPECT_EQ(x[idx].edges, y[idx].edges);
  }
  std::vector<TensorBlob> blobs = trained.weights();
  blobs.erase(blobs.begin() + 3);
  const std::string missing = trained.weights()[3].name;
  Status status = fresh.load_weights(blobs);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find(missing), std::string::npos);
  blobs = trained.weights();
  blobs[0].shape.push_back(1);
  status = fresh.load_weights(blobs);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find("shape"), std::string::npos);
}

TEST(LayerDag, training_on_fewer_than_two_graphs_is_an_error) {
  Codebook book;
  std::vector<TrainingGraph> graphs = corpus(book);
  const LayerDagConfig config = tiny_config(book, graphs);
  graphs.resize(1);
  LayerDag model = LayerDag::create(config, 1);
  Expected<std::vector<ModuleReport>> reports = model.train(graphs, tiny_training());
  ASSERT_FALSE(reports);
  EXPECT_NE(reports.error().message().find("at least 2 graphs"), std::string::npos);
}

TEST(LayerDag, sizes_and_training_options_that_cannot_train_are_named) {
  Codebook book;
  std::vector<TrainingGraph> graphs = corpus(book);
  const LayerDagConfig config = tiny_config(book, graphs);
  EXPECT_TRUE(check_sizes(config));
  const auto sizes_error = [&](auto change) {
    LayerDagConfig changed = config;
    change(changed);
    Status status = check_sizes(changed);
    return status ? std::string("accepted") : status.error().message();
  };
  EXPECT_EQ(sizes_error([](LayerDagConfig& c) { c.heads = 0; }), "heads is 0, must be positive");
  EXPECT_EQ(sizes_error([](LayerDagConfig& c) { c.edge_steps = 0; }),
            "edge_steps is 0, must be positive");
  EXPECT_EQ(sizes_error([](LayerDagConfig& c) {
              c.hidden = 30;
              c.heads = 4;
            }),
            "hidden 30 is not a multiple of heads 4");

  LayerDag model = LayerDag::create(config, 1);
  TrainOptions options = tiny_training();
  options.eval_every = 0;  // was a division by zero
  Expected<std::vector<ModuleReport>> reports = model.train(graphs, options);
  ASSERT_FALSE(reports);
  EXPECT_EQ(reports.error().message(), "eval_every is 0, must be positive");
  options = tiny_training();
  options.learning_rate = std::nan("");
  reports = model.train(graphs, options);
  ASSERT_FALSE(reports);
  EXPECT_NE(reports.error().message().find("learning rate nan"), std::string::npos);
}

// Chains of the given lengths, encoded with one codebook, each labelled log10 of its node count.
struct ChainSets {
  std::vector<EncodedDag> train, test;
  std::vector<double> targets, expected;
  std::array<uint32_t, kAttrCount> classes{};
};
ChainSets chain_sets(const std::vector<uint32_t>& train_lengths,
                     const std::vector<uint32_t>& test_lengths) {
  std::vector<Dag> train_dags, test_dags;
  for (const uint32_t length : train_lengths)
    train_dags.push_back(test::chain_with_all_reduce(length));
  for (const uint32_t length : test_lengths)
    test_dags.push_back(test::chain_with_all_reduce(length));
  std::vector<Dag> all = train_dags;
  all.insert(all.end(), test_dags.begin(), test_dags.end());
  const Codebook book = Codebook::fit(all, {});
  ChainSets out;
  for (const Dag& dag : train_dags) {
    out.train.push_back(encode_dag(layer_dag(dag), book));
    out.targets.push_back(std::log10(dag.size()));
  }
  for (const Dag& dag : test_dags) {
    out.test.push_back(encode_dag(layer_dag(dag), book));
    out.expected.push_back(std::log10(dag.size()));
  }
  out.classes = book.class_counts();
  return out;
}

TEST(Surrogate, learns_a_quantity_that_grows_with_the_graph) {
  // Target: log10 of the chain length. Trained on lengths 1..12 minus a few, tested on those.
  std::vector<uint32_t> train_lengths, test_lengths;
  for (uint32_t length = 1; length <= 12; ++length)
    (length % 4 == 2 ? test_lengths : train_lengths).push_back(length);
  const ChainSets sets = chain_sets(train_lengths, test_lengths);
  SurrogateOptions options;
  options.hidden = 16;
  options.layers = 2;
  options.steps = 150;
  options.batch = 8;
  const std::vector<double> predicted =
      fit_and_predict_surrogate(sets.train, sets.targets, sets.test, sets.classes, options);
  ASSERT_EQ(predicted.size(), sets.test.size());
  EXPECT_GT(pearson(predicted, sets.expected), 0.8);
}

// The log-sum readout extrapolates in size: trained on chains of 1 to 8 nodes, it predicts
// log10 of the length of chains two to three times longer, which the held-out real graphs need
// (they run past the synthetic samples' sizes); the sum readout errs more than twice as much.
TEST(Surrogate, log_sum_readout_extrapolates_to_longer_graphs) {
  const ChainSets sets = chain_sets({1, 2, 3, 4, 5, 6, 7, 8}, {12, 16, 20, 24});
  auto error_of = [&](SurrogateReadout readout) {
    SurrogateOptions options;
    options.readout = readout;
    options.hidden = 16;
    options.layers = 2;
    options.steps = 300;
    options.batch = 8;
    const std::vector<double> predicted =
        fit_and_predict_surrogate(sets.train, sets.targets, sets.test, sets.classes, options);
    EXPECT_EQ(predicted.size(), sets.test.size());
    if (readout == SurrogateReadout::kLogSum) {
      EXPECT_GT(pearson(predicted, sets.expected), 0.9);
    }
    return mean_absolute_error(predicted, sets.expected);
  };
  const double log_sum = error_of(SurrogateReadout::kLogSum);
  const double sum = error_of(SurrogateReadout::kSum);
  EXPECT_LT(log_sum, 0.2);
  EXPECT_LT(log_sum, sum);
}

}  // namespace layerdag_test
}  // namespace orrery::synth
