// synth/layerdag.h: the LayerDAG generative model (its three networks, their training, sampling)
// and the surrogate regressor, behind an interface without libtorch (only layerdag.cpp includes
// it).
//
// A graph is generated one Kahn layer at a time, each step conditioned on the graph so far (with a
// dummy node, so the empty graph has something to encode) and on the graph's label (simulated
// time, FLOPs, communication share; synth/synthesizer.h):
//   1. the layer size: a classifier over 0 .. max_layer_size (0 ends the graph; never for the first
//      layer; the graph also ends at the corpus's deepest layer or when the layer drawn does not
//      fit in the window, where a training window of a larger graph ends too);
//   2. the new nodes' attributes: discrete diffusion over each attribute's classes, node_steps
//      steps, from the corpus marginals, a transformer layer over the new nodes;
//   3. their parents among all earlier nodes: binary diffusion over every candidate edge,
//      edge_steps steps, the encoder reading the noisy candidate edges; every new node keeps at
//      least one parent (the most probable one). The first layer has no edges.
// Each network encodes its input by bidirectional message passing (sums over parents and over
// children apart, h <- GELU(A W h + A^T W' h + W_self h)) on per-attribute embeddings, sinusoidal
// encodings of every node's absolute and relative layer, and the label; the outputs of every round
// are concatenated and projected; graph readout is a sum then BatchNorm. The three are trained
// separately (cross-entropy; Adam with amsgrad), each keeping the weights of its best validation
// loss. docs/models/synth.md has the sizes and defaults.
//
// Determinism: initialization follows the seed (torch's generator), every random draw of training
// and sampling comes from synth::Rng, and CPU kernels are deterministic on one thread
// (use_one_compute_thread): the same seed gives the same weights and samples on every machine.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/codebook.h"
#include "synth/model_file.h"
#include "synth/random.h"

namespace orrery::synth {

struct LayerDagConfig {
  // Sizes (flags of `orrery synth train`).
  uint32_t hidden = 64;       // width of every encoder and head
  uint32_t mpnn_layers = 2;   // message-passing rounds per encoder
  uint32_t attr_embed = 16;   // embedding per attribute
  uint32_t level_embed = 16;  // each of the absolute and relative layer encodings
  uint32_t label_embed = 16;  // per label component
  uint32_t time_embed = 16;   // diffusion step encoding
  uint32_t heads = 4;         // attention heads over a layer's new nodes (divides hidden)
  uint32_t node_steps = 16;   // diffusion steps for attributes
  uint32_t edge_steps = 8;    // diffusion steps for edges
  // From the corpus.
  std::array<uint32_t, kAttrCount> classes{};
  std::array<std::vector<double>, kAttrCount> marginals;  // class frequencies over corpus nodes
  uint32_t labels = 0;                                    // label components (0: unconditional)
  uint32_t max_layer_size = 1;
  uint32_t max_layers = 1;
  uint32_t max_nodes = 256;
  double mean_in_degree = 1;

  nlohmann::json to_json() const;
  static Expected<LayerDagConfig> from_json(const nlohmann::json& json);
};

// The sizes a model can be built from: hidden, heads, the embeddings and the diffusion steps
// positive, and heads dividing hidden. The error names the first that is not.
Status check_sizes(const LayerDagConfig& config);

// A training graph and its label (config.labels values, each scaled to [0, 1]).
struct TrainingGraph {
  EncodedDag graph;
  std::vector<float> label;
};

enum class Module : uint8_t { kLayerSize, kAttributes, kEdges };
inline constexpr size_t kModuleCount = 3;
std::string_view module_name(Module module);  // "layer-size", "attributes", "edges"

struct TrainOptions {
  uint32_t steps = 2000;  // optimizer steps per module
  uint32_t batch = 32;    // examples (graph prefix, next layer) per step
  double learning_rate = 1e-3;
  uint32_t eval_every = 100;         // steps between validation losses
  double validation_fraction = 0.1;  // graphs held out for early stopping
  uint64_t seed = 1;
  std::array<bool, kModuleCount> modules = {true, true, true};  // which to (re)train
  std::function<void(const std::string&)> log;                  // progress lines
};

// Steps, batch and eval_every positive, the learning rate finite and positive; the error names
// the first that is not.
Status check_training(const TrainOptions& options);

// Both, and a window of at least 2 nodes: what train_model and train_graph_model check before
// they read a corpus or simulate a label.
Status check_training_setup(uint32_t window, const LayerDagConfig& sizes,
                            const TrainOptions& options);

struct ModuleReport {
  Module module = Module::kLayerSize;
  uint32_t examples = 0;
  uint32_t steps = 0;
  double train_loss = 0;       // mean over the last eval_every steps
  double validation_loss = 0;  // the best, whose weights are kept
  uint32_t best_step = 0;
  double seconds = 0;
};

struct SampleOptions {
  uint64_t seed = 1;
  uint32_t batch = 32;  // graphs generated together
  uint32_t ranks = 8;   // written into every sample
};

class LayerDag {
 public:
  // Fresh networks for `config`, initialized from `seed`.
  static LayerDag create(const LayerDagConfig& config, uint64_t seed);
  LayerDag(LayerDag&&) noexcept;
  LayerDag& operator=(LayerDag&&) noexcept;
  ~LayerDag();

  const LayerDagConfig& config() const;
  // Trainable parameters per module.
  std::array<uint64_t, kModuleCount> parameter_counts() const;

  // Trains the modules `options.modules` on `graphs` (at least two).
  Expected<std::vector<ModuleReport>> train(const std::vector<TrainingGraph>& graphs,
                                            const TrainOptions& options);
  // One graph per label (config().labels values each).
  std::vector<EncodedDag> sample(const std::vector<std::vector<float>>& labels,
                                 const SampleOptions& options) const;

  // Every parameter and buffer, named "<module>.<torch name>".
  std::vector<TensorBlob> weights() const;
  // Error naming the first tensor that is missing or has another shape.
  Status load_weights(const std::vector<TensorBlob>& blobs);

 private:
  struct Impl;
  explicit LayerDag(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The size of a new layer drawn from the layer-size classifier's probabilities (classes 0 .. the
// widest layer; 0 ends the graph): never 0 for the first layer; a size larger than `room` (what
// is left of the window) ends the graph. Exposed for tests.
uint32_t draw_layer_size(std::vector<double> probabilities, uint32_t room, bool first_layer,
                         Rng& rng);

// Puts libtorch's CPU kernels, and OpenBLAS under them, on one thread. Both split their
// reductions by thread count, so any other count changes the last bits of the weights, and the
// default (one per core) would make a model file depend on the machine. create, train, sample and
// the surrogate call it. On these small matrices one thread is also the fastest: 200 training
// steps took 21 s on one thread and 54 s on two (2 cores).
void use_one_compute_thread();

// The surrogate test: a bidirectional message-passing regressor (the encoder above, unconditioned,
// a readout, an MLP head, smooth-L1 loss on standardized targets) trained on `train` with
// `targets`, predicting `test`.
enum class SurrogateReadout {
  // Each node a vector of positive costs (softplus), summed over the graph, the head on their
  // logarithms: a time is a sum of node costs, and its logarithm grows with the log of the node
  // count, so graphs larger than the training ones are not off the head's scale.
  kLogSum,
  // The sum of the node states, batch-normalized (as the generator's networks pool).
  kSum,
};
std::string_view readout_name(SurrogateReadout readout);  // "log-sum", "sum"
struct SurrogateOptions {
  SurrogateReadout readout = SurrogateReadout::kLogSum;
  uint32_t hidden = 64;
  uint32_t layers = 3;
  uint32_t steps = 600;
  uint32_t batch = 32;
  double learning_rate = 1e-3;
  uint64_t seed = 1;
};
std::vector<double> fit_and_predict_surrogate(const std::vector<EncodedDag>& train,
                                              const std::vector<double>& targets,
                                              const std::vector<EncodedDag>& test,
                                              const std::array<uint32_t, kAttrCount>& classes,
                                              const SurrogateOptions& options);

}  // namespace orrery::synth
