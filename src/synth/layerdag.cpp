// The only file of orrery_synth that includes libtorch (about 12 s to compile).
#include "synth/layerdag.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "synth/diffusion.h"
#include "synth/random.h"

namespace orrery::synth {

std::string_view module_name(Module module) {
  switch (module) {
    case Module::kLayerSize:
      return "layer-size";
    case Module::kAttributes:
      return "attributes";
    case Module::kEdges:
      return "edges";
  }
  return "unknown";
}

uint32_t draw_layer_size(std::vector<double> probabilities, uint32_t room, bool first_layer,
                         Rng& rng) {
  if (probabilities.empty()) return 0;
  if (first_layer) probabilities[0] = 0;  // a graph has at least one layer
  double total = 0;
  for (double value : probabilities) total += value;
  const uint32_t size = total > 0 ? rng.pick(std::span<const double>(probabilities)) : 0;
  // A layer that does not fit ends the graph, as a training window ends where its graph's next
  // layer would not fit (synth/layers.h). Drawing among the sizes that fit instead filled half
  // the samples to the last node of the window.
  return size > room ? 0 : size;
}

std::string_view readout_name(SurrogateReadout readout) {
  return readout == SurrogateReadout::kLogSum ? "log-sum" : "sum";
}

nlohmann::json LayerDagConfig::to_json() const {
  nlohmann::json marginal_json = nlohmann::json::array();
  for (const auto& marginal : marginals) marginal_json.push_back(marginal);
  return {{"hidden", hidden},
          {"mpnn_layers", mpnn_layers},
          {"attr_embed", attr_embed},
          {"level_embed", level_embed},
          {"label_embed", label_embed},
          {"time_embed", time_embed},
          {"heads", heads},
          {"node_steps", node_steps},
          {"edge_steps", edge_steps},
          {"classes", classes},
          {"marginals", marginal_json},
          {"labels", labels},
          {"max_layer_size", max_layer_size},
          {"max_layers", max_layers},
          {"max_nodes", max_nodes},
          {"mean_in_degree", mean_in_degree}};
}

Expected<LayerDagConfig> LayerDagConfig::from_json(const nlohmann::json& json) {
  LayerDagConfig config;
  try {
    config.hidden = json.at("hidden").get<uint32_t>();
    config.mpnn_layers = json.at("mpnn_layers").get<uint32_t>();
    config.attr_embed = json.at("attr_embed").get<uint32_t>();
    config.level_embed = json.at("level_embed").get<uint32_t>();
    config.label_embed = json.at("label_embed").get<uint32_t>();
    config.time_embed = json.at("time_embed").get<uint32_t>();
    config.heads = json.at("heads").get<uint32_t>();
    config.node_steps = json.at("node_steps").get<uint32_t>();
    config.edge_steps = json.at("edge_steps").get<uint32_t>();
    config.classes = json.at("classes").get<std::array<uint32_t, kAttrCount>>();
    const auto& marginals = json.at("marginals");
    if (marginals.size() != kAttrCount) {
      return Error::make(ErrorKind::kParse, "model configuration: {} marginals, expected {}",
                         marginals.size(), kAttrCount);
    }
    for (size_t attr = 0; attr < kAttrCount; ++attr) {
      config.marginals[attr] = marginals[attr].get<std::vector<double>>();
      if (config.marginals[attr].size() != config.classes[attr]) {
        return Error::make(ErrorKind::kParse,
                           "model configuration: attribute {} has {} classes but {} marginals",
                           attr_name(static_cast<Attr>(attr)), config.classes[attr],
                           config.marginals[attr].size());
      }
    }
    config.labels = json.at("labels").get<uint32_t>();
    config.max_layer_size = json.at("max_layer_size").get<uint32_t>();
    config.max_layers = json.at("max_layers").get<uint32_t>();
    config.max_nodes = json.at("max_nodes").get<uint32_t>();
    config.mean_in_degree = json.at("mean_in_degree").get<double>();
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "model configuration: {}", error.what());
  }
  if (Status sizes = check_sizes(config); !sizes) {
    return Error::make(ErrorKind::kParse, "model configuration: {}", sizes.error().message());
  }
  return config;
}

Status check_sizes(const LayerDagConfig& config) {
  const std::pair<const char*, uint32_t> positive[] = {
      {"hidden", config.hidden},           {"heads", config.heads},
      {"attr_embed", config.attr_embed},   {"level_embed", config.level_embed},
      {"label_embed", config.label_embed}, {"time_embed", config.time_embed},
      {"node_steps", config.node_steps},   {"edge_steps", config.edge_steps}};
  for (const auto& [name, value] : positive) {
    if (value == 0)
      return Error::make(ErrorKind::kInvalidArgument, "{} is 0, must be positive", name);
  }
  if (config.hidden % config.heads != 0) {
    return Error::make(ErrorKind::kInvalidArgument, "hidden {} is not a multiple of heads {}",
                       config.hidden, config.heads);
  }
  return {};
}

Status check_training(const TrainOptions& options) {
  const std::pair<const char*, uint32_t> positive[] = {
      {"steps", options.steps}, {"batch", options.batch}, {"eval_every", options.eval_every}};
  for (const auto& [name, value] : positive) {
    if (value == 0)
      return Error::make(ErrorKind::kInvalidArgument, "{} is 0, must be positive", name);
  }
  // Adam's learning rate is a float in libtorch: beyond its range the step would be inf.
  if (!(options.learning_rate > 0) || options.learning_rate > 1e30) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "learning rate {} is not a positive number up to 1e30",
                       options.learning_rate);
  }
  return {};
}

Status check_training_setup(uint32_t window, const LayerDagConfig& sizes,
                            const TrainOptions& options) {
  if (Status valid = check_sizes(sizes); !valid) return valid;
  if (Status valid = check_training(options); !valid) return valid;
  if (window < 2) {
    return Error::make(ErrorKind::kInvalidArgument, "window {} is below 2 nodes", window);
  }
  return {};
}

void use_one_compute_thread() {
  torch::set_num_threads(1);
  // OpenBLAS, under libtorch's matrix products when it is Debian's selected BLAS, has a thread
  // count of its own (one per core by default). Another BLAS has no such call and nothing to set.
  using SetThreads = void (*)(int);
  if (auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(1);
}

namespace {

using torch::Tensor;
namespace nn = torch::nn;

// ---------------------------------------------------------------------------------------------
// Batches: graphs padded to one node count, edges as flat (child, parent) position lists (message
// passing gathers and scatter-adds per edge: traces have one or two parents a node, far fewer
// than the n x n of a dense adjacency).

// One input graph: the nodes of layers [0, prefix) of `graph`, optionally with layer `prefix` too
// (the new layer, whose edges are given as `extra` instead of the graph's own), after a dummy node.
struct View {
  const EncodedDag* graph = nullptr;
  uint32_t prefix = 0;
  bool with_new_layer = false;
  const std::vector<float>* label = nullptr;
  // (parent, child) graph positions added as edges (the noisy candidates of the new layer).
  const std::vector<std::pair<uint32_t, uint32_t>>* extra = nullptr;

  uint32_t end() const {
    const uint32_t last = with_new_layer ? prefix + 1 : prefix;
    return graph->layer_start[std::min<uint32_t>(last, graph->layers())];
  }
};

struct DenseBatch {
  int64_t graphs = 0;
  int64_t nodes = 0;  // padded node count, the dummy included
  Tensor x;           // [B, n, A] classes (padding: the dummy class)
  Tensor mask;        // [B, n] 1 for the dummy and real nodes
  Tensor abs_level;   // [B, n]
  Tensor rel_level;   // [B, n]
  Tensor child;       // [E] flat positions b * n + pos of every edge's child
  Tensor parent;      // [E] and of its parent
  Tensor labels;      // [B, L]
};

DenseBatch make_batch(const std::vector<View>& views, const LayerDagConfig& config) {
  DenseBatch batch;
  batch.graphs = static_cast<int64_t>(views.size());
  int64_t nodes = 1;
  for (const View& view : views) nodes = std::max<int64_t>(nodes, 1 + view.end());
  batch.nodes = nodes;
  const int64_t B = batch.graphs, n = nodes, A = kAttrCount;
  std::vector<int64_t> x(static_cast<size_t>(B * n * A));
  std::vector<float> mask(static_cast<size_t>(B * n), 0.0f);
  std::vector<float> abs_level(static_cast<size_t>(B * n), 0.0f);
  std::vector<float> rel_level(static_cast<size_t>(B * n), 0.0f);
  std::vector<int64_t> child, parent;
  std::vector<float> labels(static_cast<size_t>(B) * config.labels, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const View& view = views[static_cast<size_t>(b)];
    const EncodedDag& graph = *view.graph;
    const uint32_t end = view.end();
    for (int64_t pos = 0; pos < n; ++pos) {
      for (int64_t a = 0; a < A; ++a) {
        x[static_cast<size_t>((b * n + pos) * A + a)] = config.classes[static_cast<size_t>(a)];
      }
    }
    mask[static_cast<size_t>(b * n)] = 1.0f;
    const uint32_t top = view.with_new_layer ? view.prefix + 1 : view.prefix;
    rel_level[static_cast<size_t>(b * n)] = static_cast<float>(top);
    uint32_t layer = 0;
    for (uint32_t node = 0; node < end; ++node) {
      while (node >= graph.layer_start[layer + 1]) ++layer;
      const int64_t pos = 1 + node;
      for (int64_t a = 0; a < A; ++a) {
        x[static_cast<size_t>((b * n + pos) * A + a)] = graph.x[node][static_cast<size_t>(a)];
      }
      mask[static_cast<size_t>(b * n + pos)] = 1.0f;
      abs_level[static_cast<size_t>(b * n + pos)] = static_cast<float>(layer + 1);
      rel_level[static_cast<size_t>(b * n + pos)] = static_cast<float>(top - (layer + 1));
    }
    const uint32_t prefix_end = graph.layer_start[std::min(view.prefix, graph.layers())];
    for (const auto& [from, to] : graph.edges) {
      if (to < prefix_end) {
        child.push_back(b * n + 1 + to);
        parent.push_back(b * n + 1 + from);
      }
    }
    if (view.extra != nullptr) {
      for (const auto& [from, to] : *view.extra) {
        child.push_back(b * n + 1 + to);
        parent.push_back(b * n + 1 + from);
      }
    }
    if (view.label != nullptr) {
      for (uint32_t idx = 0; idx < config.labels && idx < view.label->size(); ++idx) {
        labels[static_cast<size_t>(b) * config.labels + idx] = (*view.label)[idx];
      }
    }
  }
  batch.x = torch::tensor(x, torch::kLong).view({B, n, A});
  batch.mask = torch::tensor(mask).view({B, n});
  batch.abs_level = torch::tensor(abs_level).view({B, n});
  batch.rel_level = torch::tensor(rel_level).view({B, n});
  batch.child = torch::tensor(child, torch::kLong);
  batch.parent = torch::tensor(parent, torch::kLong);
  batch.labels = torch::tensor(labels).view({B, static_cast<int64_t>(config.labels)});
  return batch;
}

// Transformer-style sinusoids of integer positions: [.., dim].
Tensor sinusoid(const Tensor& positions, int64_t dim) {
  const Tensor idx = torch::arange(0, dim / 2, torch::kFloat);
  const Tensor freq = torch::exp(idx * (-std::log(10000.0) * 2.0 / static_cast<double>(dim)));
  const Tensor arg = positions.unsqueeze(-1) * freq;
  return torch::cat({torch::sin(arg), torch::cos(arg)}, -1);
}

// Fourier features of values in [0, 1]: frequencies pi 2^k.
Tensor fourier(const Tensor& values, int64_t dim) {
  const Tensor idx = torch::arange(0, dim / 2, torch::kFloat);
  const Tensor freq = torch::exp2(idx) * std::numbers::pi;
  const Tensor arg = values.unsqueeze(-1) * freq;
  return torch::cat({torch::sin(arg), torch::cos(arg)}, -1);
}

nn::Sequential mlp(int64_t in, int64_t hidden, int64_t out) {
  return nn::Sequential(nn::Linear(in, hidden), nn::GELU(), nn::Linear(hidden, out));
}

// ---------------------------------------------------------------------------------------------
// The bidirectional message-passing encoder shared by every network.

struct EncoderImpl : nn::Module {
  EncoderImpl(const LayerDagConfig& config, bool pool, uint32_t hidden, uint32_t rounds,
              uint32_t labels)
      : config_(config), labels_(labels), pool_(pool) {
    const int64_t H = hidden;
    for (size_t a = 0; a < kAttrCount; ++a) {
      embeds_.push_back(register_module(
          "embed" + std::to_string(a),
          nn::Embedding(static_cast<int64_t>(config.classes[a]) + 1, config.attr_embed)));
    }
    const int64_t in = static_cast<int64_t>(kAttrCount * config.attr_embed) +
                       2 * static_cast<int64_t>(config.level_embed) +
                       static_cast<int64_t>(labels) * config.label_embed;
    project_in_ = register_module("project_in", mlp(in, H, H));
    for (uint32_t round = 0; round < rounds; ++round) {
      const std::string suffix = std::to_string(round);
      to_child_.push_back(register_module("to_child" + suffix, nn::Linear(H, H)));
      to_parent_.push_back(register_module("to_parent" + suffix, nn::Linear(H, H)));
      self_.push_back(register_module("self" + suffix, nn::Linear(H, H)));
    }
    project_out_ = register_module("project_out", mlp((rounds + 1) * H, H, H));
    if (pool) norm_ = register_module("norm", nn::BatchNorm1d(H));
  }

  // Node states [B, n, H] (padding rows zero).
  Tensor nodes(const DenseBatch& batch) {
    std::vector<Tensor> parts;
    for (size_t a = 0; a < kAttrCount; ++a) {
      parts.push_back(embeds_[a]->forward(batch.x.select(2, static_cast<int64_t>(a))));
    }
    parts.push_back(sinusoid(batch.abs_level, config_.level_embed));
    parts.push_back(sinusoid(batch.rel_level, config_.level_embed));
    if (labels_ > 0) {
      const Tensor label = fourier(batch.labels.slice(1, 0, labels_), config_.label_embed)
                               .reshape({batch.graphs, 1, -1})
                               .expand({batch.graphs, batch.nodes, -1});
      parts.push_back(label);
    }
    const Tensor mask = batch.mask.unsqueeze(-1);
    Tensor h = project_in_->forward(torch::cat(parts, -1)) * mask;
    std::vector<Tensor> rounds{h};
    const int64_t rows = batch.graphs * batch.nodes;
    for (size_t round = 0; round < self_.size(); ++round) {
      const Tensor flat = h.reshape({rows, -1});
      // Sum over parents (A W h) and over children (A^T W' h); CPU index_add is sequential over
      // the index, so the sums do not depend on threads.
      const Tensor from_parents = torch::zeros_like(flat).index_add(
          0, batch.child, to_child_[round]->forward(flat).index_select(0, batch.parent));
      const Tensor from_children = torch::zeros_like(flat).index_add(
          0, batch.parent, to_parent_[round]->forward(flat).index_select(0, batch.child));
      h = (torch::gelu(from_parents + from_children + self_[round]->forward(flat))).view_as(h) *
          mask;
      rounds.push_back(h);
    }
    return project_out_->forward(torch::cat(rounds, -1)) * mask;
  }

  // Graph states [B, H]: the sum over nodes, batch-normalized.
  Tensor graphs(const DenseBatch& batch) {
    const Tensor h = nodes(batch);
    return norm_->forward(h.sum(1));
  }

  LayerDagConfig config_;
  uint32_t labels_;
  bool pool_;
  std::vector<nn::Embedding> embeds_;
  nn::Sequential project_in_{nullptr};
  std::vector<nn::Linear> to_child_, to_parent_, self_;
  nn::Sequential project_out_{nullptr};
  nn::BatchNorm1d norm_{nullptr};
};
TORCH_MODULE(Encoder);

// 1. The layer-size classifier.
struct SizeModelImpl : nn::Module {
  explicit SizeModelImpl(const LayerDagConfig& config) {
    encoder = register_module(
        "encoder", Encoder(config, true, config.hidden, config.mpnn_layers, config.labels));
    head = register_module("head", mlp(config.hidden, config.hidden, config.max_layer_size + 1));
  }
  Tensor forward(const DenseBatch& batch) { return head->forward(encoder->graphs(batch)); }
  Encoder encoder{nullptr};
  nn::Sequential head{nullptr};
};
TORCH_MODULE(SizeModel);

// 2. The attribute denoiser: p(x_0 | x_t, graph so far) for every new node of a layer.
struct AttrModelImpl : nn::Module {
  explicit AttrModelImpl(const LayerDagConfig& config) : config_(config) {
    const int64_t H = config.hidden;
    encoder = register_module(
        "encoder", Encoder(config, true, config.hidden, config.mpnn_layers, config.labels));
    for (size_t a = 0; a < kAttrCount; ++a) {
      noisy_.push_back(register_module(
          "noisy" + std::to_string(a),
          nn::Embedding(static_cast<int64_t>(config.classes[a]), config.attr_embed)));
    }
    const int64_t in = H + config.time_embed + static_cast<int64_t>(kAttrCount * config.attr_embed);
    project = register_module("project", nn::Linear(in, H));
    qkv = register_module("qkv", nn::Linear(H, 3 * H));
    out = register_module("out", nn::Linear(H, H));
    norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({H})));
    feed = register_module("feed", mlp(H, 4 * H, H));
    norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({H})));
    for (size_t a = 0; a < kAttrCount; ++a) {
      heads_.push_back(register_module("head" + std::to_string(a),
                                       mlp(H, H, static_cast<int64_t>(config.classes[a]))));
    }
  }

  // Logits per attribute, each [B, m, K_a], for noisy classes x_t [B, m, A] at steps t [B].
  std::vector<Tensor> predict(const Tensor& graph_state, const Tensor& x_t, const Tensor& t,
                              const Tensor& new_mask) {
    const int64_t B = x_t.size(0), m = x_t.size(1), H = config_.hidden;
    std::vector<Tensor> parts;
    parts.push_back(graph_state.unsqueeze(1).expand({B, m, H}));
    parts.push_back(sinusoid(t, config_.time_embed).unsqueeze(1).expand({B, m, -1}));
    for (size_t a = 0; a < kAttrCount; ++a) {
      parts.push_back(noisy_[a]->forward(x_t.select(2, static_cast<int64_t>(a))));
    }
    Tensor h = torch::gelu(project->forward(torch::cat(parts, -1)));
    // Self-attention over the layer's new nodes (no positions: a layer is a set).
    const int64_t heads = config_.heads, dh = H / heads;
    const auto chunks = qkv->forward(h).chunk(3, -1);
    auto split = [&](const Tensor& v) { return v.view({B, m, heads, dh}).transpose(1, 2); };
    Tensor scores = torch::matmul(split(chunks[0]), split(chunks[1]).transpose(-1, -2)) /
                    std::sqrt(static_cast<double>(dh));
    scores = scores.masked_fill(new_mask.view({B, 1, 1, m}) == 0, -1e9);
    const Tensor attended = torch::matmul(torch::softmax(scores, -1), split(chunks[2]))
                                .transpose(1, 2)
                                .reshape({B, m, H});
    h = norm1->forward(h + out->forward(attended));
    h = norm2->forward(h + feed->forward(h));
    std::vector<Tensor> logits;
    for (size_t a = 0; a < kAttrCount; ++a) logits.push_back(heads_[a]->forward(h));
    return logits;
  }

  LayerDagConfig config_;
  Encoder encoder{nullptr};
  std::vector<nn::Embedding> noisy_;
  nn::Linear project{nullptr}, qkv{nullptr}, out{nullptr};
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  nn::Sequential feed{nullptr};
  std::vector<nn::Sequential> heads_;
};
TORCH_MODULE(AttrModel);

// 3. The edge denoiser: p(e_0 = 1 | e_t, graph so far with the noisy candidates) per candidate.
struct EdgeModelImpl : nn::Module {
  explicit EdgeModelImpl(const LayerDagConfig& config) : config_(config) {
    encoder = register_module(
        "encoder", Encoder(config, false, config.hidden, config.mpnn_layers, config.labels));
    score = register_module("score", mlp(2 * config.hidden + config.time_embed, config.hidden, 1));
  }
  // `src`, `dst`: flat positions b * n + pos; `t`: [Q] steps. Logits [Q].
  Tensor forward(const DenseBatch& batch, const Tensor& src, const Tensor& dst, const Tensor& t) {
    const Tensor h = encoder->nodes(batch).reshape({batch.graphs * batch.nodes, -1});
    const Tensor input = torch::cat(
        {sinusoid(t, config_.time_embed), h.index_select(0, src), h.index_select(0, dst)}, -1);
    return score->forward(input).squeeze(-1);
  }
  LayerDagConfig config_;
  Encoder encoder{nullptr};
  nn::Sequential score{nullptr};
};
TORCH_MODULE(EdgeModel);

// The surrogate regressor.
struct SurrogateImpl : nn::Module {
  SurrogateImpl(const LayerDagConfig& config, uint32_t hidden, uint32_t rounds,
                SurrogateReadout readout)
      : readout_(readout) {
    encoder = register_module("encoder", Encoder(config, true, hidden, rounds, 0));
    if (readout_ == SurrogateReadout::kLogSum)
      cost = register_module("cost", mlp(hidden, hidden, hidden));
    head = register_module("head", mlp(hidden, hidden, 1));
  }
  Tensor forward(const DenseBatch& batch) {
    if (readout_ == SurrogateReadout::kSum)
      return head->forward(encoder->graphs(batch)).squeeze(-1);
    const Tensor costs =
        torch::softplus(cost->forward(encoder->nodes(batch))) * batch.mask.unsqueeze(-1);
    return head->forward(torch::log(costs.sum(1) + 1e-3)).squeeze(-1);
  }
  SurrogateReadout readout_;
  Encoder encoder{nullptr};
  nn::Sequential cost{nullptr};
  nn::Sequential head{nullptr};
};
TORCH_MODULE(Surrogate);

std::vector<double> to_doubles(const Tensor& tensor) {
  const Tensor flat = tensor.detach().to(torch::kDouble).contiguous().view({-1});
  return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
}

// Every parameter and buffer of `module`, in registration order.
std::vector<std::pair<std::string, Tensor>> named_state(const nn::Module& module) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& item : module.named_parameters()) out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

std::vector<Tensor> snapshot(const nn::Module& module) {
  std::vector<Tensor> out;
  for (const auto& [name, tensor] : named_state(module)) out.push_back(tensor.detach().clone());
  return out;
}

void restore(nn::Module& module, const std::vector<Tensor>& saved) {
  torch::NoGradGuard guard;
  const auto state = named_state(module);
  for (size_t idx = 0; idx < state.size(); ++idx) state[idx].second.copy_(saved[idx]);
}

uint64_t count_parameters(const nn::Module& module) {
  uint64_t count = 0;
  for (const auto& parameter : module.parameters())
    count += static_cast<uint64_t>(parameter.numel());
  return count;
}

// ---------------------------------------------------------------------------------------------
// Training examples: (graph, layer).

struct Example {
  uint32_t graph;
  uint32_t layer;
};

// A batch of examples with their loss, for one module.
class LossFunction {
 public:
  virtual ~LossFunction() = default;
  virtual Tensor loss(const std::vector<Example>& examples, Rng& rng) = 0;
};

class SizeLoss final : public LossFunction {
 public:
  SizeLoss(SizeModel& model, const std::vector<TrainingGraph>& graphs, const LayerDagConfig& config)
      : model_(model), graphs_(graphs), config_(config) {}
  Tensor loss(const std::vector<Example>& examples, Rng&) override {
    std::vector<View> views;
    std::vector<int64_t> targets;
    for (const Example& example : examples) {
      const TrainingGraph& graph = graphs_[example.graph];
      views.push_back(View{&graph.graph, example.layer, false, &graph.label, nullptr});
      targets.push_back(example.layer < graph.graph.layers()
                            ? graph.graph.layer_start[example.layer + 1] -
                                  graph.graph.layer_start[example.layer]
                            : 0);
    }
    const Tensor logits = model_->forward(make_batch(views, config_));
    return torch::nn::functional::cross_entropy(logits, torch::tensor(targets, torch::kLong));
  }

 private:
  SizeModel& model_;
  const std::vector<TrainingGraph>& graphs_;
  const LayerDagConfig& config_;
};

class AttrLoss final : public LossFunction {
 public:
  AttrLoss(AttrModel& model, const std::vector<TrainingGraph>& graphs, const LayerDagConfig& config)
      : model_(model),
        graphs_(graphs),
        config_(config),
        schedule_(NoiseSchedule::cosine(config.node_steps)) {}
  Tensor loss(const std::vector<Example>& examples, Rng& rng) override {
    std::vector<View> views;
    int64_t m = 1;
    for (const Example& example : examples) {
      const TrainingGraph& graph = graphs_[example.graph];
      views.push_back(View{&graph.graph, example.layer, false, &graph.label, nullptr});
      m = std::max<int64_t>(
          m, graph.graph.layer_start[example.layer + 1] - graph.graph.layer_start[example.layer]);
    }
    const int64_t B = static_cast<int64_t>(examples.size()), A = kAttrCount;
    std::vector<int64_t> noisy(static_cast<size_t>(B * m * A), 0),
        clean(static_cast<size_t>(B * m * A), 0);
    std::vector<float> mask(static_cast<size_t>(B * m), 0.0f), steps(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const Example& example = examples[static_cast<size_t>(b)];
      const EncodedDag& graph = graphs_[example.graph].graph;
      const uint32_t t = 1 + rng.below(config_.node_steps);
      steps[static_cast<size_t>(b)] = static_cast<float>(t);
      const uint32_t first = graph.layer_start[example.layer];
      for (uint32_t node = first; node < graph.layer_start[example.layer + 1]; ++node) {
        const int64_t slot = b * m + (node - first);
        mask[static_cast<size_t>(slot)] = 1.0f;
        for (int64_t a = 0; a < A; ++a) {
          const uint32_t x0 = graph.x[node][static_cast<size_t>(a)];
          clean[static_cast<size_t>(slot * A + a)] = x0;
          noisy[static_cast<size_t>(slot * A + a)] = noise_class(
              x0, schedule_.alpha_bar[t], config_.marginals[static_cast<size_t>(a)], rng);
        }
      }
    }
    const Tensor graph_state = model_->encoder->graphs(make_batch(views, config_));
    const Tensor x_t = torch::tensor(noisy, torch::kLong).view({B, m, A});
    const Tensor x_0 = torch::tensor(clean, torch::kLong).view({B, m, A});
    const Tensor new_mask = torch::tensor(mask).view({B, m});
    const std::vector<Tensor> logits =
        model_->predict(graph_state, x_t, torch::tensor(steps), new_mask);
    const Tensor flat_mask = new_mask.view({-1});
    Tensor total = torch::zeros({});
    for (int64_t a = 0; a < A; ++a) {
      const Tensor per_node = torch::nn::functional::cross_entropy(
          logits[static_cast<size_t>(a)].view({B * m, -1}), x_0.select(2, a).reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      total = total + (per_node * flat_mask).sum() / flat_mask.sum();
    }
    return total;
  }

 private:
  AttrModel& model_;
  const std::vector<TrainingGraph>& graphs_;
  const LayerDagConfig& config_;
  NoiseSchedule schedule_;
};

// The candidates of one layer and their noisy states, shared by training and sampling.
struct EdgeQuery {
  std::vector<int64_t> src, dst;  // flat positions in the batch
  std::vector<float> steps;
};

class EdgeLoss final : public LossFunction {
 public:
  EdgeLoss(EdgeModel& model, const std::vector<TrainingGraph>& graphs, const LayerDagConfig& config)
      : model_(model),
        graphs_(graphs),
        config_(config),
        schedule_(NoiseSchedule::cosine(config.edge_steps)) {}
  Tensor loss(const std::vector<Example>& examples, Rng& rng) override {
    const size_t B = examples.size();
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> noisy(B);
    std::vector<View> views;
    std::vector<float> targets;
    EdgeQuery query;
    std::vector<uint32_t> first_of(B), count_of(B), new_of(B);
    for (size_t b = 0; b < B; ++b) {
      const TrainingGraph& graph = graphs_[examples[b].graph];
      const uint32_t layer = examples[b].layer;
      first_of[b] = graph.graph.layer_start[layer];
      new_of[b] = graph.graph.layer_start[layer + 1] - first_of[b];
    }
    for (size_t b = 0; b < B; ++b) {
      const TrainingGraph& graph = graphs_[examples[b].graph];
      views.push_back(View{&graph.graph, examples[b].layer, true, &graph.label, &noisy[b]});
    }
    int64_t n = 1;
    for (const View& view : views) n = std::max<int64_t>(n, 1 + view.end());
    for (size_t b = 0; b < B; ++b) {
      const EncodedDag& graph = graphs_[examples[b].graph].graph;
      const uint32_t candidates = first_of[b];
      const double rho = edge_marginal(config_.mean_in_degree, candidates);
      const std::vector<double> marginal = {1 - rho, rho};
      const uint32_t t = 1 + rng.below(config_.edge_steps);
      const double alpha_bar = schedule_.alpha_bar[t];
      for (uint32_t child = first_of[b]; child < first_of[b] + new_of[b]; ++child) {
        for (uint32_t parent = 0; parent < candidates; ++parent) {
          const bool present = std::binary_search(graph.edges.begin(), graph.edges.end(),
                                                  std::make_pair(parent, child));
          const uint32_t e_t = noise_class(present ? 1 : 0, alpha_bar, marginal, rng);
          if (e_t == 1) noisy[b].emplace_back(parent, child);
          query.src.push_back(static_cast<int64_t>(b) * n + 1 + parent);
          query.dst.push_back(static_cast<int64_t>(b) * n + 1 + child);
          query.steps.push_back(static_cast<float>(t));
          targets.push_back(present ? 1.0f : 0.0f);
        }
      }
    }
    const DenseBatch batch = make_batch(views, config_);
    const Tensor logits =
        model_->forward(batch, torch::tensor(query.src, torch::kLong),
                        torch::tensor(query.dst, torch::kLong), torch::tensor(query.steps));
    return torch::binary_cross_entropy_with_logits(logits, torch::tensor(targets));
  }

 private:
  EdgeModel& model_;
  const std::vector<TrainingGraph>& graphs_;
  const LayerDagConfig& config_;
  NoiseSchedule schedule_;
};

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

// Trains `module` on `train` examples with early stopping on `validation` examples; returns the
// report (the module keeps its best weights).
ModuleReport fit_module(nn::Module& module, LossFunction& loss_fn,
                        const std::vector<Example>& train, const std::vector<Example>& validation,
                        const TrainOptions& options, Module which, uint64_t seed) {
  const auto started = std::chrono::steady_clock::now();
  ModuleReport report;
  report.module = which;
  report.examples = static_cast<uint32_t>(train.size());
  Rng rng(seed);
  torch::optim::Adam optimizer(module.parameters(),
                               torch::optim::AdamOptions(options.learning_rate).amsgrad(true));
  auto validate = [&]() {
    if (validation.empty()) return 0.0;
    torch::NoGradGuard guard;
    module.eval();
    Rng fixed(seed ^ 0x5eed);  // the same noise at every evaluation
    std::vector<double> losses;
    for (size_t first = 0; first < validation.size(); first += options.batch) {
      const size_t last = std::min(validation.size(), first + options.batch);
      std::vector<Example> chunk(validation.begin() + static_cast<std::ptrdiff_t>(first),
                                 validation.begin() + static_cast<std::ptrdiff_t>(last));
      losses.push_back(loss_fn.loss(chunk, fixed).item<double>());
    }
    module.train();
    return mean(losses);
  };
  double best = std::numeric_limits<double>::infinity();
  std::vector<Tensor> best_state = snapshot(module);
  std::vector<double> recent;
  module.train();
  const uint32_t batch = std::max<uint32_t>(options.batch, 2);  // BatchNorm needs two
  for (uint32_t step = 1; step <= options.steps; ++step) {
    std::vector<Example> examples;
    for (uint32_t idx = 0; idx < batch; ++idx) {
      examples.push_back(train[rng.below(static_cast<uint32_t>(train.size()))]);
    }
    optimizer.zero_grad();
    const Tensor loss = loss_fn.loss(examples, rng);
    loss.backward();
    optimizer.step();
    recent.push_back(loss.item<double>());
    if (recent.size() > options.eval_every) recent.erase(recent.begin());
    if (step % options.eval_every == 0 || step == options.steps) {
      const double value = validation.empty() ? mean(recent) : validate();
      if (value < best) {
        best = value;
        best_state = snapshot(module);
        report.best_step = step;
      }
      if (options.log) {
        options.log(fmt::format("  {} step {}/{}: train loss {:.4f}, validation loss {:.4f}",
                                module_name(which), step, options.steps, mean(recent), value));
      }
    }
  }
  restore(module, best_state);
  module.eval();
  report.steps = options.steps;
  report.train_loss = mean(recent);
  report.validation_loss = best;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct LayerDag::Impl {
  explicit Impl(const LayerDagConfig& c) : config(c), size(c), attr(c), edge(c) {}
  LayerDagConfig config;
  SizeModel size;
  AttrModel attr;
  EdgeModel edge;

  std::vector<std::pair<std::string, nn::Module*>> modules() {
    return {{"size", size.ptr().get()}, {"attr", attr.ptr().get()}, {"edge", edge.ptr().get()}};
  }
};

LayerDag::LayerDag(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LayerDag::LayerDag(LayerDag&&) noexcept = default;
LayerDag& LayerDag::operator=(LayerDag&&) noexcept = default;
LayerDag::~LayerDag() = default;

LayerDag LayerDag::create(const LayerDagConfig& config, uint64_t seed) {
  use_one_compute_thread();
  torch::manual_seed(seed);
  auto impl = std::make_unique<Impl>(config);
  impl->size->eval();
  impl->attr->eval();
  impl->edge->eval();
  return LayerDag(std::move(impl));
}

const LayerDagConfig& LayerDag::config() const { return impl_->config; }

std::array<uint64_t, kModuleCount> LayerDag::parameter_counts() const {
  return {count_parameters(*impl_->size), count_parameters(*impl_->attr),
          count_parameters(*impl_->edge)};
}

Expected<std::vector<ModuleReport>> LayerDag::train(const std::vector<TrainingGraph>& graphs,
                                                    const TrainOptions& options) {
  if (Status valid = check_training(options); !valid) return valid.error();
  use_one_compute_thread();
  if (graphs.size() < 2) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "training needs at least 2 graphs, the corpus gave {}", graphs.size());
  }
  const LayerDagConfig& config = impl_->config;
  // Graphs held out for validation, drawn with the seed.
  Rng split(options.seed);
  std::vector<uint8_t> held(graphs.size(), 0);
  const auto held_count = std::min<size_t>(
      graphs.size() - 1, static_cast<size_t>(std::llround(options.validation_fraction *
                                                          static_cast<double>(graphs.size()))));
  for (size_t count = 0; count < held_count;) {
    const uint32_t pick = split.below(static_cast<uint32_t>(graphs.size()));
    if (!held[pick]) {
      held[pick] = 1;
      ++count;
    }
  }
  constexpr size_t kValidationExamples = 128;
  std::array<std::vector<Example>, kModuleCount> train, validation;
  for (uint32_t g = 0; g < graphs.size(); ++g) {
    const uint32_t layers = graphs[g].graph.layers();
    auto& tr = held[g] ? validation : train;
    for (uint32_t layer = 0; layer <= layers; ++layer) {
      tr[0].push_back({g, layer});  // layer == layers: the end
      if (layer < layers) tr[1].push_back({g, layer});
      if (layer >= 1 && layer < layers) tr[2].push_back({g, layer});
    }
  }
  for (auto& list : validation) {
    if (list.size() > kValidationExamples) {
      // An even spread, deterministic.
      std::vector<Example> kept;
      for (size_t idx = 0; idx < kValidationExamples; ++idx) {
        kept.push_back(list[idx * list.size() / kValidationExamples]);
      }
      list = std::move(kept);
    }
  }
  std::vector<ModuleReport> reports;
  SizeLoss size_loss(impl_->size, graphs, config);
  AttrLoss attr_loss(impl_->attr, graphs, config);
  EdgeLoss edge_loss(impl_->edge, graphs, config);
  std::array<LossFunction*, kModuleCount> losses = {&size_loss, &attr_loss, &edge_loss};
  std::array<nn::Module*, kModuleCount> modules = {impl_->size.ptr().get(), impl_->attr.ptr().get(),
                                                   impl_->edge.ptr().get()};
  for (size_t idx = 0; idx < kModuleCount; ++idx) {
    if (!options.modules[idx]) continue;
    if (train[idx].empty()) {
      if (options.log) {
        options.log(fmt::format("  {}: no examples (every graph has one layer); left untrained",
                                module_name(static_cast<Module>(idx))));
      }
      continue;
    }
    reports.push_back(fit_module(*modules[idx], *losses[idx], train[idx], validation[idx], options,
                                 static_cast<Module>(idx), options.seed + 101 * (idx + 1)));
  }
  return reports;
}

std::vector<EncodedDag> LayerDag::sample(const std::vector<std::vector<float>>& labels,
                                         const SampleOptions& options) const {
  use_one_compute_thread();
  torch::NoGradGuard guard;
  const LayerDagConfig& config = impl_->config;
  impl_->size->eval();
  impl_->attr->eval();
  impl_->edge->eval();
  const NoiseSchedule node_schedule = NoiseSchedule::cosine(config.node_steps);
  const NoiseSchedule edge_schedule = NoiseSchedule::cosine(config.edge_steps);
  Rng rng(options.seed);
  std::vector<EncodedDag> out;
  out.reserve(labels.size());
  const uint32_t chunk = std::max<uint32_t>(options.batch, 1);
  for (size_t first = 0; first < labels.size(); first += chunk) {
    const size_t count = std::min<size_t>(chunk, labels.size() - first);
    std::vector<EncodedDag> graphs(count);
    std::vector<uint8_t> active(count, 1);
    for (EncodedDag& graph : graphs) {
      graph.ranks = options.ranks;
      graph.layer_start = {0};
    }
    for (uint32_t layer = 0; layer < config.max_layers; ++layer) {
      std::vector<size_t> live;
      for (size_t idx = 0; idx < count; ++idx) {
        if (active[idx]) live.push_back(idx);
      }
      if (live.empty()) break;
      // 1. Layer sizes.
      std::vector<View> views;
      for (size_t idx : live)
        views.push_back(View{&graphs[idx], layer, false, &labels[first + idx], nullptr});
      const std::vector<double> size_probs =
          to_doubles(torch::softmax(impl_->size->forward(make_batch(views, config)), -1));
      const uint32_t size_classes = config.max_layer_size + 1;
      std::vector<size_t> grow;
      std::vector<uint32_t> sizes;
      for (size_t k = 0; k < live.size(); ++k) {
        std::vector<double> p(
            size_probs.begin() + static_cast<std::ptrdiff_t>(k * size_classes),
            size_probs.begin() + static_cast<std::ptrdiff_t>((k + 1) * size_classes));
        const uint32_t size = draw_layer_size(
            std::move(p), config.max_nodes - graphs[live[k]].size(), layer == 0, rng);
        if (size == 0) {
          active[live[k]] = 0;
        } else {
          grow.push_back(live[k]);
          sizes.push_back(size);
        }
      }
      if (grow.empty()) break;
      // 2. Attributes by discrete diffusion.
      views.clear();
      for (size_t idx : grow)
        views.push_back(View{&graphs[idx], layer, false, &labels[first + idx], nullptr});
      const Tensor graph_state = impl_->attr->encoder->graphs(make_batch(views, config));
      const int64_t B = static_cast<int64_t>(grow.size()), A = kAttrCount;
      const int64_t m = *std::max_element(sizes.begin(), sizes.end());
      std::vector<int64_t> x(static_cast<size_t>(B * m * A), 0);
      std::vector<float> mask(static_cast<size_t>(B * m), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        for (uint32_t node = 0; node < sizes[static_cast<size_t>(b)]; ++node) {
          mask[static_cast<size_t>(b * m + node)] = 1.0f;
          for (int64_t a = 0; a < A; ++a) {
            x[static_cast<size_t>((b * m + node) * A + a)] =
                rng.pick(std::span<const double>(config.marginals[static_cast<size_t>(a)]));
          }
        }
      }
      const Tensor new_mask = torch::tensor(mask).view({B, m});
      std::vector<double> posterior;
      for (uint32_t t = config.node_steps; t >= 1; --t) {
        const Tensor steps = torch::full({B}, static_cast<float>(t));
        const std::vector<Tensor> logits = impl_->attr->predict(
            graph_state, torch::tensor(x, torch::kLong).view({B, m, A}), steps, new_mask);
        for (int64_t a = 0; a < A; ++a) {
          std::vector<double> probs =
              to_doubles(torch::softmax(logits[static_cast<size_t>(a)], -1));
          const auto& marginal = config.marginals[static_cast<size_t>(a)];
          const size_t classes = marginal.size();
          // A class the corpus never had (a memory node in a corpus without any) is not generated.
          for (size_t idx = 0; idx < probs.size(); ++idx) {
            if (marginal[idx % classes] <= 0) probs[idx] = 0;
          }
          posterior.resize(classes);
          for (int64_t b = 0; b < B; ++b) {
            for (uint32_t node = 0; node < sizes[static_cast<size_t>(b)]; ++node) {
              const size_t row = static_cast<size_t>(b * m + node);
              int64_t& cls = x[row * A + static_cast<size_t>(a)];
              reverse_step(std::span<const double>(probs.data() + row * classes, classes),
                           static_cast<uint32_t>(cls), node_schedule, t, marginal, posterior);
              cls = rng.pick(std::span<const double>(posterior));
            }
          }
        }
      }
      for (size_t k = 0; k < grow.size(); ++k) {
        EncodedDag& graph = graphs[grow[k]];
        for (uint32_t node = 0; node < sizes[k]; ++node) {
          NodeClasses classes{};
          for (int64_t a = 0; a < A; ++a) {
            classes[static_cast<size_t>(a)] = static_cast<uint16_t>(
                x[(k * static_cast<size_t>(m) + node) * A + static_cast<size_t>(a)]);
          }
          graph.x.push_back(classes);
        }
        graph.layer_start.push_back(graph.size());
      }
      if (layer == 0) continue;
      // 3. Edges by binary diffusion.
      std::vector<std::vector<uint8_t>> state(grow.size());
      std::vector<double> rho(grow.size());
      for (size_t k = 0; k < grow.size(); ++k) {
        const EncodedDag& graph = graphs[grow[k]];
        const uint32_t candidates = graph.layer_start[layer];
        rho[k] = edge_marginal(config.mean_in_degree, candidates);
        state[k].assign(static_cast<size_t>(candidates) * sizes[k], 0);
        const uint32_t previous = graph.layer_start[layer - 1];
        for (uint32_t node = 0; node < sizes[k]; ++node) {
          bool from_previous = false;
          for (uint32_t parent = 0; parent < candidates; ++parent) {
            const bool on = rng.uniform() < rho[k];
            state[k][node * candidates + parent] = on;
            from_previous = from_previous || (on && parent >= previous);
          }
          if (!from_previous) {  // a parent in the layer before
            state[k][node * candidates + previous + rng.below(candidates - previous)] = 1;
          }
        }
      }
      std::vector<std::vector<std::pair<uint32_t, uint32_t>>> noisy(grow.size());
      for (uint32_t t = config.edge_steps; t >= 1; --t) {
        views.clear();
        for (size_t k = 0; k < grow.size(); ++k) {
          const EncodedDag& graph = graphs[grow[k]];
          const uint32_t candidates = graph.layer_start[layer];
          noisy[k].clear();
          for (uint32_t node = 0; node < sizes[k]; ++node) {
            for (uint32_t parent = 0; parent < candidates; ++parent) {
              if (state[k][node * candidates + parent])
                noisy[k].emplace_back(parent, candidates + node);
            }
          }
          views.push_back(View{&graph, layer, true, &labels[first + grow[k]], &noisy[k]});
        }
        const DenseBatch batch = make_batch(views, config);
        EdgeQuery query;
        for (size_t k = 0; k < grow.size(); ++k) {
          const uint32_t candidates = graphs[grow[k]].layer_start[layer];
          for (uint32_t node = 0; node < sizes[k]; ++node) {
            for (uint32_t parent = 0; parent < candidates; ++parent) {
              query.src.push_back(static_cast<int64_t>(k) * batch.nodes + 1 + parent);
              query.dst.push_back(static_cast<int64_t>(k) * batch.nodes + 1 + candidates + node);
              query.steps.push_back(static_cast<float>(t));
            }
          }
        }
        const std::vector<double> p1 = to_doubles(torch::sigmoid(impl_->edge->forward(
            batch, torch::tensor(query.src, torch::kLong), torch::tensor(query.dst, torch::kLong),
            torch::tensor(query.steps))));
        size_t offset = 0;
        std::vector<double> out2(2);
        for (size_t k = 0; k < grow.size(); ++k) {
          const uint32_t candidates = graphs[grow[k]].layer_start[layer];
          const uint32_t previous = graphs[grow[k]].layer_start[layer - 1];
          const std::vector<double> marginal = {1 - rho[k], rho[k]};
          for (uint32_t node = 0; node < sizes[k]; ++node) {
            bool from_previous = false;
            uint32_t best = previous;
            for (uint32_t parent = 0; parent < candidates; ++parent) {
              const double p = p1[offset + node * candidates + parent];
              const std::array<double, 2> p_x0 = {1 - p, p};
              uint8_t& e = state[k][node * candidates + parent];
              reverse_step(p_x0, e, edge_schedule, t, marginal, out2);
              e = rng.uniform() < out2[1] ? 1 : 0;
              if (parent >= previous) {
                from_previous = from_previous || e;
                if (p > p1[offset + node * candidates + best]) best = parent;
              }
            }
            // A node of layer L has a parent in layer L-1 (its Kahn layer is its longest path
            // from a source): without one it would sit in a lower layer than it was generated
            // in, and the sample's layer sizes and depth would not be the generated ones. Keep
            // the most probable parent there.
            if (!from_previous) state[k][node * candidates + best] = 1;
          }
          offset += static_cast<size_t>(candidates) * sizes[k];
        }
      }
      for (size_t k = 0; k < grow.size(); ++k) {
        EncodedDag& graph = graphs[grow[k]];
        const uint32_t candidates = graph.layer_start[layer];
        for (uint32_t node = 0; node < sizes[k]; ++node) {
          for (uint32_t parent = 0; parent < candidates; ++parent) {
            if (state[k][node * candidates + parent])
              graph.edges.emplace_back(parent, candidates + node);
          }
        }
        std::sort(graph.edges.begin(), graph.edges.end());
      }
    }
    for (EncodedDag& graph : graphs) out.push_back(std::move(graph));
  }
  return out;
}

std::vector<TensorBlob> LayerDag::weights() const {
  std::vector<TensorBlob> out;
  for (const auto& [prefix, module] : impl_->modules()) {
    for (const auto& [name, tensor] : named_state(*module)) {
      TensorBlob blob;
      blob.name = prefix + "." + name;
      blob.shape = tensor.sizes().vec();
      const Tensor flat = tensor.detach().to(torch::kFloat).contiguous().view({-1});
      blob.values.assign(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
      out.push_back(std::move(blob));
    }
  }
  return out;
}

Status LayerDag::load_weights(const std::vector<TensorBlob>& blobs) {
  std::map<std::string, const TensorBlob*> by_name;
  for (const TensorBlob& blob : blobs) by_name[blob.name] = &blob;
  torch::NoGradGuard guard;
  for (const auto& [prefix, module] : impl_->modules()) {
    for (const auto& [name, tensor] : named_state(*module)) {
      const std::string key = prefix + "." + name;
      const auto it = by_name.find(key);
      if (it == by_name.end()) {
        return Error::make(ErrorKind::kParse, "the model file has no tensor '{}'", key);
      }
      if (it->second->shape != tensor.sizes().vec()) {
        return Error::make(
            ErrorKind::kParse, "tensor '{}' has shape [{}] in the model file, expected [{}]", key,
            fmt::join(it->second->shape, ", "), fmt::join(tensor.sizes().vec(), ", "));
      }
      const Tensor values =
          torch::tensor(it->second->values).view(tensor.sizes()).to(tensor.scalar_type());
      tensor.copy_(values);
    }
  }
  return Status::ok();
}

std::vector<double> fit_and_predict_surrogate(const std::vector<EncodedDag>& train,
                                              const std::vector<double>& targets,
                                              const std::vector<EncodedDag>& test,
                                              const std::array<uint32_t, kAttrCount>& classes,
                                              const SurrogateOptions& options) {
  if (train.size() < 2 || test.empty()) return std::vector<double>(test.size(), 0.0);
  use_one_compute_thread();
  LayerDagConfig config;
  config.classes = classes;
  config.labels = 0;
  torch::manual_seed(options.seed);
  Surrogate model(config, options.hidden, options.layers, options.readout);
  double mu = 0, sigma = 0;
  for (double value : targets) mu += value;
  mu /= static_cast<double>(targets.size());
  for (double value : targets) sigma += (value - mu) * (value - mu);
  sigma = std::sqrt(sigma / static_cast<double>(targets.size()));
  if (sigma <= 0) sigma = 1;
  auto whole = [](const EncodedDag& graph) {
    return View{&graph, graph.layers(), false, nullptr, nullptr};
  };
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(options.learning_rate).amsgrad(true));
  Rng rng(options.seed);
  model->train();
  const uint32_t batch = std::max<uint32_t>(options.batch, 2);
  for (uint32_t step = 0; step < options.steps; ++step) {
    std::vector<View> views;
    std::vector<float> y;
    for (uint32_t idx = 0; idx < batch; ++idx) {
      const uint32_t pick = rng.below(static_cast<uint32_t>(train.size()));
      views.push_back(whole(train[pick]));
      y.push_back(static_cast<float>((targets[pick] - mu) / sigma));
    }
    optimizer.zero_grad();
    const Tensor loss =
        torch::smooth_l1_loss(model->forward(make_batch(views, config)), torch::tensor(y));
    loss.backward();
    optimizer.step();
  }
  model->eval();
  torch::NoGradGuard guard;
  std::vector<double> out;
  for (size_t first = 0; first < test.size(); first += batch) {
    std::vector<View> views;
    for (size_t idx = first; idx < std::min(test.size(), first + batch); ++idx)
      views.push_back(whole(test[idx]));
    for (double value : to_doubles(model->forward(make_batch(views, config))))
      out.push_back(value * sigma + mu);
  }
  return out;
}

}  // namespace orrery::synth
