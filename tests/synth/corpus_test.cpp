#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chakra/trace_builder.h"
#include "gen/llm_generator.h"
#include "gen/llm_options.h"
#include "gen/microbench.h"
#include "synth/corpus.h"
#include "synth/model_file.h"

namespace orrery::synth {
namespace corpus_test {

namespace fs = std::filesystem;

// A two-layer Llama under dp 2, tp 2, pp 2 (8 ranks).
void write_small_llm(const std::string& prefix) {
  const std::string model = prefix + "_model.json";
  fs::create_directories(fs::path(prefix).parent_path());
  {
    std::ofstream out(model);
    out << R"({"base": "llama2-7b", "layers": 2})";
  }
  gen::LlmOptions options;
  options.model = model;
  options.global_batch = 4;
  options.dp = 2;
  options.tp = 2;
  options.pp = 2;
  Expected<gen::LlmGenerator> generator = gen::make_llm_generator(options);
  ASSERT_TRUE(generator) << generator.error().message();
  ASSERT_TRUE(gen::write_llm_traces(*generator, prefix, gen::RankFileOptions{}));
  fs::remove(model);
}

TEST(Corpus, finds_sets_and_files_keeps_each_distinct_rank_program_once) {
  test::TempDir dir;
  gen::MicrobenchSpec spec;
  spec.kind = gen::MicrobenchKind::kAllReduce;
  spec.bytes = 1 << 20;
  spec.ranks = 8;
  ASSERT_TRUE(gen::write_microbench(spec, dir.file("micro/ar")));
  write_small_llm(dir.file("llm/w"));
  Expected<Corpus> corpus = load_corpus(dir.file(""), 1);
  ASSERT_TRUE(corpus) << corpus.error().message();
  ASSERT_EQ(corpus->sets.size(), 2u);
  EXPECT_EQ(corpus->sets[0], dir.file("llm/w"));
  EXPECT_EQ(corpus->sets[1], dir.file("micro/ar"));
  // The microbenchmark's 8 ranks are one program; the pipeline's two stages are two (the tensor
  // and data replicas of a stage differ only in their groups' members, not their shapes).
  EXPECT_EQ(corpus->graphs.size(), 3u);
  EXPECT_EQ(corpus->duplicates, 13u);
  const Dag& stage0 = corpus->graphs[0];
  EXPECT_EQ(stage0.ranks, 8u);
  bool tensor_group = false;
  for (const DagNode& node : stage0.nodes) {
    if (node.kind == NodeKind::kAllReduce && node.group == GroupShape{2, 1}) tensor_group = true;
  }
  EXPECT_TRUE(tensor_group);
  const Dag& micro = corpus->graphs[2];
  ASSERT_EQ(micro.size(), 1u);
  EXPECT_EQ(micro.nodes[0].kind, NodeKind::kAllReduce);
  EXPECT_EQ(micro.nodes[0].comm_bytes, 1u << 20);
  EXPECT_TRUE(micro.nodes[0].group.whole_job());
}

TEST(Corpus, a_real_converted_trace_loads_with_host_ops_and_collectives) {
  Expected<Corpus> corpus = load_trace_set(test::feeder_trace());
  ASSERT_TRUE(corpus) << corpus.error().message();
  ASSERT_EQ(corpus->graphs.size(), 1u);
  const Dag& dag = corpus->graphs[0];
  EXPECT_EQ(dag.size(), 3664u);
  uint32_t collectives = 0, cpu = 0;
  for (const DagNode& node : dag.nodes) {
    collectives += is_collective(node.kind);
    cpu += node.kind == NodeKind::kCpuCompute;
  }
  EXPECT_GT(collectives, 0u);
  EXPECT_GT(cpu, 0u);
}

TEST(Corpus, a_missing_rank_or_an_empty_folder_is_an_error) {
  test::TempDir dir;
  Expected<Corpus> empty = load_corpus(dir.file(""));
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message().find("no .et files"), std::string::npos);
  gen::MicrobenchSpec spec;
  spec.bytes = 1024;
  spec.ranks = 3;
  ASSERT_TRUE(gen::write_microbench(spec, dir.file("ar")));
  fs::remove(dir.file("ar.1.et"));
  Expected<Corpus> gap = load_corpus(dir.file(""));
  ASSERT_FALSE(gap);
  EXPECT_NE(gap.error().message().find("ar.1.et"), std::string::npos) << gap.error().message();
  Expected<Corpus> not_folder = load_corpus(dir.file("nothing"));
  ASSERT_FALSE(not_folder);
}

TEST(Corpus, a_symbolic_link_loop_beside_the_traces_is_skipped_as_a_dangling_link_is) {
  // Examining such an entry threw (status: too many levels of symbolic links) and ended the
  // program.
  test::TempDir dir;
  gen::MicrobenchSpec spec;
  spec.bytes = 1024;
  spec.ranks = 2;
  ASSERT_TRUE(gen::write_microbench(spec, dir.file("ar")));
  fs::create_symlink(dir.file("loop_b.et"), dir.file("loop_a.et"));
  fs::create_symlink(dir.file("loop_a.et"), dir.file("loop_b.et"));
  fs::create_symlink(dir.file("gone.et"), dir.file("dangling.et"));
  Expected<Corpus> corpus = load_corpus(dir.file(""), 1);
  ASSERT_TRUE(corpus) << corpus.error().message();
  EXPECT_EQ(corpus->sets, std::vector<std::string>{dir.file("ar")});
}

TEST(ModelFile, round_trips_and_names_what_is_wrong) {
  test::TempDir dir;
  ModelFile file;
  file.meta = {{"answer", 42}};
  file.tensors.push_back({"a.weight", {2, 3}, {1, 2, 3, 4, 5, 6}});
  file.tensors.push_back({"b", {1}, {-0.5f}});
  ASSERT_TRUE(write_model_file(dir.file("m.pt"), file));
  Expected<ModelFile> back = read_model_file(dir.file("m.pt"));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->meta["answer"], 42);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back->tensors[0].values[5], 6.0f);
  EXPECT_EQ(back->tensors[1].values[0], -0.5f);

  {
    std::ofstream out(dir.file("junk.pt"));
    out << "PK\x03\x04 not ours";
  }
  Expected<ModelFile> junk = read_model_file(dir.file("junk.pt"));
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message().find("not an orrery synth model file"), std::string::npos);
  fs::create_directory(dir.file("folder.pt"));
  Expected<ModelFile> folder = read_model_file(dir.file("folder.pt"));
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().message(), dir.file("folder.pt") + ": is a folder, not the model file");
  fs::resize_file(dir.file("m.pt"), fs::file_size(dir.file("m.pt")) - 2);
  Expected<ModelFile> cut = read_model_file(dir.file("m.pt"));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message().find("truncated in the values of tensor 'b'"), std::string::npos);

  // A header whose shapes claim far more than the file holds (2^31 floats, or a product that
  // would wrap past 2^64) is refused before any buffer is allocated.
  for (const char* shape : {"[2147483648]", "[4294967296, 4294967296, 3]"}) {
    {
      std::ofstream out(dir.file("big.pt"), std::ios::binary);
      out << "orrery-synth-model 1\n{\"tensors\": [{\"name\": \"w\", \"shape\": " << shape
          << "}]}\n1234";
    }
    Expected<ModelFile> big = read_model_file(dir.file("big.pt"));
    ASSERT_FALSE(big) << shape;
    EXPECT_NE(big.error().message().find("truncated in the values of tensor 'w' (its shape needs "
                                         "more values than the file holds)"),
              std::string::npos)
        << big.error().message();
  }
}

}  // namespace corpus_test
}  // namespace orrery::synth
