// The expose table (transports/expose_table.hpp) on its own: what a full table, a drop, a
// republish over an old range and partial overlaps do, since a schedule rarely fills it.
#include <gtest/gtest.h>

#include "transports/expose_table.hpp"

namespace trib {
namespace {

ExposeHandle handle(uint64_t v) {
  ExposeHandle h;
  h.w[0] = v;
  h.w[3] = ~v;
  return h;
}

// A fresh table: every entry free (the shm segment and the loopback fabric zero it).
struct Table {
  ExposeTable t{};
};

TEST(ExposeTable, FullTableRefusesAndADropMakesRoom) {
  Table tb;
  for (int i = 0; i < kExposeEntries; ++i) EXPECT_TRUE(tb.t.publish(uint64_t(i) * 1000, 100, handle(i))) << i;
  // A ninth distinct range finds no free entry: the executor copies into the window instead.
  EXPECT_FALSE(tb.t.publish(9000, 100, handle(9)));
  ExposeHandle h;
  uint64_t into = 0;
  EXPECT_EQ(tb.t.find(9000, 100, &h, &into), 0) << "a refused range must read from the window";
  // Every published range is still found whole, with its handle and the offset into it.
  for (int i = 0; i < kExposeEntries; ++i) {
    ASSERT_EQ(tb.t.find(uint64_t(i) * 1000 + 10, 50, &h, &into), 1) << i;
    EXPECT_EQ(h.w[0], uint64_t(i));
    EXPECT_EQ(h.w[3], ~uint64_t(i));
    EXPECT_EQ(into, 10u);
  }
  tb.t.drop(3000, 1);  // overlaps entry 3 only: it ends whole
  EXPECT_EQ(tb.t.find(3000, 100, &h, &into), 0);
  EXPECT_EQ(tb.t.find(2000, 100, &h, &into), 1);
  EXPECT_TRUE(tb.t.publish(9000, 100, handle(9)));
  ASSERT_EQ(tb.t.find(9050, 50, &h, &into), 1);
  EXPECT_EQ(h.w[0], 9u);
  EXPECT_EQ(into, 50u);
}

TEST(ExposeTable, RepublishingOverARangeReplacesWhatOverlapsIt) {
  Table tb;
  ASSERT_TRUE(tb.t.publish(0, 100, handle(1)));
  ASSERT_TRUE(tb.t.publish(100, 100, handle(2)));
  // [50, 150) overlaps both: both end, the new one holds it.
  ASSERT_TRUE(tb.t.publish(50, 100, handle(3)));
  ExposeHandle h;
  uint64_t into = 0;
  EXPECT_EQ(tb.t.find(0, 50, &h, &into), 0);
  EXPECT_EQ(tb.t.find(150, 50, &h, &into), 0);
  ASSERT_EQ(tb.t.find(50, 100, &h, &into), 1);
  EXPECT_EQ(h.w[0], 3u);
  // Republishing the same range again does not take a second entry.
  for (int i = 0; i < 3 * kExposeEntries; ++i) ASSERT_TRUE(tb.t.publish(50, 100, handle(10 + i))) << i;
  ASSERT_EQ(tb.t.find(50, 100, &h, &into), 1);
  EXPECT_EQ(h.w[0], uint64_t(10 + 3 * kExposeEntries - 1));
}

TEST(ExposeTable, ARangeHeldOnlyInPartIsReportedAsSuch) {
  Table tb;
  ASSERT_TRUE(tb.t.publish(100, 100, handle(1)));
  ASSERT_TRUE(tb.t.publish(200, 100, handle(2)));
  ExposeHandle h;
  uint64_t into = 0;
  EXPECT_EQ(tb.t.find(150, 100, &h, &into), -1) << "spans two exposures";
  EXPECT_EQ(tb.t.find(50, 100, &h, &into), -1) << "half in the window";
  EXPECT_EQ(tb.t.find(0, 100, &h, &into), 0) << "touches none";
  EXPECT_EQ(tb.t.find(300, 8, &h, &into), 0) << "adjacent, not overlapping";
  // Zero bytes dropped at an exposure's start ends nothing.
  tb.t.drop(100, 0);
  EXPECT_EQ(tb.t.find(100, 100, &h, &into), 1);
}

}  // namespace
}  // namespace trib
