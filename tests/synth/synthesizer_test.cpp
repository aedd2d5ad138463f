// The three verbs end to end on a small generated corpus: train, sample, eval, and the command
// line's answers to bad input.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"
#include "gen/microbench.h"
#include "synth/synthesizer.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace synthesizer_test {

namespace fs = std::filesystem;

// Eight one-collective microbenchmarks (4 ranks, a compute node before) and a ring exchange.
void write_corpus(const std::string& folder) {
  int idx = 0;
  for (gen::MicrobenchKind kind :
       {gen::MicrobenchKind::kAllReduce, gen::MicrobenchKind::kAllGather,
        gen::MicrobenchKind::kReduceScatter, gen::MicrobenchKind::kAllToAll}) {
    for (uint64_t bytes : {uint64_t{1} << 16, uint64_t{1} << 22}) {
      gen::MicrobenchSpec spec;
      spec.kind = kind;
      spec.bytes = bytes;
      spec.ranks = 4;
      spec.compute_us = 10 + 10 * static_cast<uint64_t>(idx);
      ASSERT_TRUE(gen::write_microbench(spec, folder + "/mb" + std::to_string(idx++) + "/w"));
    }
  }
  gen::MicrobenchSpec ring;
  ring.kind = gen::MicrobenchKind::kSendRecv;
  ring.bytes = 1 << 20;
  ring.ranks = 4;
  ASSERT_TRUE(gen::write_microbench(ring, folder + "/ring/w"));
}

TrainSettings tiny(const std::string& corpus, const std::string& scratch) {
  TrainSettings settings;
  settings.corpus = corpus;
  settings.window = 32;
  settings.sizes = test::tiny_sizes();
  settings.training.steps = 8;
  settings.training.batch = 8;
  settings.training.eval_every = 4;
  settings.platform.ranks = 4;
  settings.threads = 1;
  settings.scratch = scratch;
  return settings;
}

std::string bytes_of(const std::string& path) { return read_whole_file(path); }

TEST(Synthesizer, train_sample_eval_end_to_end_and_deterministic) {
  test::TempDir dir;
  write_corpus(dir.file("corpus"));
  Expected<TrainSummary> first =
      train_model(tiny(dir.file("corpus"), dir.file("s1")), dir.file("a.pt"), {});
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->sets, 9u);
  EXPECT_EQ(first->rank_programs, 9u);  // every rank of a microbenchmark runs the same program
  EXPECT_EQ(first->training_graphs, 9u);
  EXPECT_EQ(first->modules.size(), 3u);
  Expected<TrainSummary> again =
      train_model(tiny(dir.file("corpus"), dir.file("s2")), dir.file("b.pt"), {});
  ASSERT_TRUE(again);
  EXPECT_EQ(bytes_of(dir.file("a.pt")), bytes_of(dir.file("b.pt")));  // the same model file

  SampleSettings sample;
  sample.model = dir.file("a.pt");
  sample.output = dir.file("out");
  sample.count = 6;
  sample.seed = 4;
  Expected<SampleSummary> sampled = sample_traces(sample, {});
  ASSERT_TRUE(sampled) << sampled.error().message();
  EXPECT_EQ(sampled->samples, 6u);
  EXPECT_EQ(sampled->ranks, 4u);
  EXPECT_TRUE(fs::exists(dir.file("out/sample_00005.3.et")));
  EXPECT_TRUE(fs::exists(dir.file("out/sample_00005.json")));
  sample.output = dir.file("out2");
  ASSERT_TRUE(sample_traces(sample, {}));
  for (int r = 0; r < 4; ++r) {
    const std::string name = "/sample_00002." + std::to_string(r) + ".et";
    EXPECT_EQ(bytes_of(dir.file("out") + name), bytes_of(dir.file("out2") + name));
  }

  EvalSettings eval;
  eval.model = dir.file("a.pt");
  eval.real = dir.file("corpus");
  eval.synthetic = dir.file("out");
  eval.threads = 1;
  eval.surrogate_options.steps = 20;
  eval.surrogate_options.hidden = 16;
  Expected<EvalReport> report = evaluate(eval, {});
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->validity, 1.0) << (report->invalid.empty() ? "" : report->invalid[0]);
  EXPECT_EQ(report->baseline_validity, 1.0);
  EXPECT_EQ(report->real_graphs, 9u);
  EXPECT_EQ(report->synthetic_sets, 6u);
  EXPECT_EQ(report->baseline_samples, 6u);
  const nlohmann::json json = eval_to_json(*report);
  EXPECT_EQ(json["validity"], 1.0);
  for (const char* stat : {"layer_size", "in_degree", "out_degree", "kind", "collective_mix"}) {
    ASSERT_TRUE(json["mmd"].contains(stat)) << stat;
    EXPECT_GE(json["mmd"][stat]["model"].get<double>(), 0.0);
    EXPECT_GE(json["mmd"][stat]["baseline"].get<double>(), 0.0);
  }
  EXPECT_TRUE(json["wasserstein"].contains("log10_time_ns"));
  EXPECT_TRUE(json["surrogate"]["model"].contains("pearson"));
  EXPECT_EQ(json["surrogate"]["readout"], "log-sum");

  // The real corpus as its own "synthetic" set: every distance is zero.
  eval.synthetic = dir.file("corpus");
  eval.surrogate = false;
  Expected<EvalReport> self = evaluate(eval, {});
  ASSERT_TRUE(self) << self.error().message();
  for (const auto& [name, pair] : self->mmd) EXPECT_NEAR(pair.first, 0.0, 1e-12) << name;
  EXPECT_NEAR(self->wasserstein.at("log10_time_ns").first, 0.0, 1e-12);

  // A target beyond the training graphs' times is conditioned on the nearest end, and says so.
  EXPECT_TRUE(sampled->notes.empty());
  sample.output = dir.file("out3");
  sample.count = 1;
  sample.target_time_ns = 1e12;
  Expected<SampleSummary> far = sample_traces(sample, {});
  ASSERT_TRUE(far) << far.error().message();
  ASSERT_EQ(far->notes.size(), 1u);
  EXPECT_EQ(far->notes[0].rfind("target time 1e+03 s lies outside the training graphs' ", 0), 0u)
      << far->notes[0];
}

// The networks compute on one thread whatever --threads and OpenBLAS's own count say: both split
// reductions by their thread count, and the model file differed in its last bits between one and
// two threads (and so between machines of different core counts).
TEST(Synthesizer, model_files_and_samples_do_not_depend_on_thread_counts) {
  test::TempDir dir;
  const std::string example = std::string(ORRERY_TEST_DATA_DIR) + "/../../examples/llama_dp2tp2pp2";
  fs::create_directories(dir.file("corpus"));
  for (int rank = 0; rank < 8; ++rank) {
    const std::string name = "/workload." + std::to_string(rank) + ".et";
    fs::copy_file(example + name, dir.file("corpus") + name);
  }
  fs::copy_file(example + "/workload.json", dir.file("corpus/workload.json"));
  for (const char* threads : {"1", "2"}) {
    CommandResult trained = run_program(
        "env", {std::string("OPENBLAS_NUM_THREADS=") + threads, ORRERY_BINARY, "synth", "train",
                "--corpus", dir.file("corpus"), "-o", dir.file(std::string("m") + threads + ".pt"),
                "--steps", "20", "--threads", threads, "-q"});
    ASSERT_EQ(trained.exit_code, 0) << trained.err;
    CommandResult sampled =
        run_program("env", {std::string("OPENBLAS_NUM_THREADS=") + threads, ORRERY_BINARY, "synth",
                            "sample", "--model", dir.file("m1.pt"), "-o",
                            dir.file(std::string("s") + threads), "-n", "2", "-q"});
    ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  }
  EXPECT_TRUE(bytes_of(dir.file("m1.pt")) == bytes_of(dir.file("m2.pt")));
  for (const char* file : {"/sample_00001.0.et", "/sample_00001.json"})
    EXPECT_EQ(bytes_of(dir.file("s1") + file), bytes_of(dir.file("s2") + file)) << file;
}

TEST(Synthesizer, the_command_line_names_what_is_wrong) {
  test::TempDir dir;
  CommandResult help = run_orrery({"synth", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("train"), std::string::npos);
  EXPECT_NE(help.out.find("sample"), std::string::npos);
  EXPECT_NE(help.out.find("eval"), std::string::npos);

  CommandResult no_corpus =
      run_orrery({"synth", "train", "--corpus", dir.file("none"), "-o", dir.file("m.pt")});
  EXPECT_EQ(no_corpus.exit_code, 1);
  EXPECT_NE(no_corpus.err.find(dir.file("none") + ": not a folder of traces"), std::string::npos)
      << no_corpus.err;

  {
    std::ofstream out(dir.file("junk.pt"));
    out << "hello";
  }
  CommandResult junk =
      run_orrery({"synth", "sample", "--model", dir.file("junk.pt"), "-o", dir.file("out")});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("not an orrery synth model file"), std::string::npos) << junk.err;

  CommandResult bad_target = run_orrery({"synth", "sample", "--model", dir.file("junk.pt"), "-o",
                                         dir.file("out"), "--target-time", "soon"});
  EXPECT_EQ(bad_target.exit_code, 1);
  EXPECT_NE(bad_target.err.find("--target-time: 'soon' is not a positive duration"),
            std::string::npos)
      << bad_target.err;

  CommandResult heads = run_orrery({"synth", "train", "--corpus", dir.file(""), "-o",
                                    dir.file("m.pt"), "--hidden", "30", "--heads", "4"});
  EXPECT_EQ(heads.exit_code, 1);
  EXPECT_NE(heads.err.find("--hidden 30 is not a multiple of --heads 4"), std::string::npos);

  // Sizes that divided by zero or crashed libtorch, now refused by name.
  for (const auto& [flag, value, expected] : std::vector<std::array<std::string, 3>>{
           {"--heads", "0", "--heads: expected 1 or more, found 0"},
           {"--eval-every", "0", "--eval-every: expected 1 or more, found 0"},
           {"--bins", "0", "--bins: expected 1 or more, found 0"},
           {"--lr", "nan", "--lr: expected a number from 1e-12 to 1000, found nan"}}) {
    CommandResult refused = run_orrery(
        {"synth", "train", "--corpus", dir.file(""), "-o", dir.file("m.pt"), flag, value});
    EXPECT_EQ(refused.exit_code, 1) << flag;
    EXPECT_NE(refused.err.find(expected), std::string::npos) << refused.err;
  }

  CommandResult readout =
      run_orrery({"synth", "eval", "--model", dir.file("junk.pt"), "--real", dir.file(""),
                  "--synthetic", dir.file(""), "--surrogate-readout", "mean"});
  EXPECT_NE(readout.exit_code, 0);
  EXPECT_NE(readout.err.find("--surrogate-readout"), std::string::npos) << readout.err;
  EXPECT_NE(readout.err.find("mean"), std::string::npos) << readout.err;
}

}  // namespace synthesizer_test
}  // namespace orrery::synth
