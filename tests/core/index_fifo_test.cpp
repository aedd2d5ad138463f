// tests/core/index_fifo_test.cpp: a FIFO of pool indices keeps order, empties, and refills.
#include "core/index_fifo.h"

#include <gtest/gtest.h>

#include <vector>

namespace orrery {
namespace index_fifo_test {

struct Record {
  int value = 0;
  uint32_t next = 0;
};

TEST(IndexFifo, keeps_order_empties_and_refills) {
  std::vector<Record> pool(4);
  IndexFifo fifo;
  EXPECT_TRUE(fifo.empty());
  fifo.push_back(pool, 2, &Record::next);
  fifo.push_back(pool, 0, &Record::next);
  fifo.push_back(pool, 3, &Record::next);
  EXPECT_EQ(fifo.pop_front(pool, &Record::next), 2u);
  EXPECT_EQ(fifo.pop_front(pool, &Record::next), 0u);
  fifo.push_back(pool, 1, &Record::next);  // joins behind 3
  EXPECT_EQ(fifo.pop_front(pool, &Record::next), 3u);
  EXPECT_EQ(fifo.pop_front(pool, &Record::next), 1u);
  EXPECT_TRUE(fifo.empty());
  EXPECT_EQ(fifo.tail, IndexFifo::kNil);
  fifo.push_back(pool, 0, &Record::next);  // a reused record: its stale link is overwritten
  EXPECT_EQ(fifo.head, 0u);
  EXPECT_EQ(pool[0].next, IndexFifo::kNil);
}

}  // namespace index_fifo_test
}  // namespace orrery
