// Double binary tree all-reduce (ASTRA-sim's DoubleBinaryTree): members form a heap-ordered binary
// tree (position p has children 2p+1 and 2p+2); even chunks use it, odd chunks its mirror (position
// n-1-i). A member waits for its children's x bytes (each receive reduced), sends up to its parent,
// waits for the parent's reply and passes it down; the root turns the sum round at once.
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct TreeState {
  uint32_t continued;  // continuations while gathering (one per child's message, or the start)
  bool replied;        // the parent's reply is being awaited or has come
};

class DoubleBinaryTree final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "doubleBinaryTree"; }

  void start(PhaseRun& run) const override {
    const Shape shape(run);
    if (shape.children == 0) {
      run.after_endpoint_delay(false, 0);  // a leaf starts by sending up
      return;
    }
    for (uint32_t child = 1; child <= shape.children; ++child) {
      run.expect(shape.actual(2 * shape.position + child));
    }
  }

  void on_continue(PhaseRun& run) const override {
    TreeState& s = run.state<TreeState>();
    const Shape shape(run);
    const uint64_t x = run.size();
    if (!s.replied) {
      // Gathering: count continuations, not receives, so that no endpoint delay of this phase is
      // still pending at its end.
      if (shape.children > 0 && ++s.continued < shape.children) return;
      if (shape.position == 0) {
        for (uint32_t child = 1; child <= shape.children; ++child) {
          run.send(shape.actual(2 * shape.position + child), x);
        }
        run.finish();
        return;
      }
      const uint32_t parent = shape.actual((shape.position - 1) / 2);
      run.send(parent, x);
      run.expect(parent);
      s.replied = true;
      return;
    }
    // The parent's reply came back: pass it down and finish.
    for (uint32_t child = 1; child <= shape.children; ++child) {
      run.send(shape.actual(2 * shape.position + child), x);
    }
    run.finish();
  }

  void on_receive(PhaseRun& run) const override { run.after_endpoint_delay(true, run.size()); }

 private:
  // This member's place in the chunk's tree.
  struct Shape {
    explicit Shape(const PhaseRun& run) : n(run.members()), mirrored(run.chunk() % 2 == 1) {
      position = mirrored ? n - 1 - run.index() : run.index();
      if (2 * position + 1 < n) ++children;
      if (2 * position + 2 < n) ++children;
    }
    // The member at tree position `pos`.
    uint32_t actual(uint32_t pos) const { return mirrored ? n - 1 - pos : pos; }
    uint32_t n;
    bool mirrored;
    uint32_t position = 0;
    uint32_t children = 0;
  };
};

}  // namespace

const CollectiveAlgorithm& double_binary_tree() {
  static const DoubleBinaryTree algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
