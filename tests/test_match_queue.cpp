// The (source, tag) match queue shared by the loopback and shm transports.
#include "transports/match_queue.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace trib {
namespace {

using Queue = MatchQueue<std::string, std::unique_ptr<int>>;

TEST(MatchQueue, MatchesBySourceAndTagExactly) {
  Queue q;
  q.addRecv(1, 7, "r1t7");
  std::string r;
  EXPECT_FALSE(q.takeRecv(2, 7, &r));  // another source, same tag
  EXPECT_FALSE(q.takeRecv(1, 8, &r));  // same source, another tag
  ASSERT_TRUE(q.takeRecv(1, 7, &r));
  EXPECT_EQ(r, "r1t7");
  EXPECT_FALSE(q.takeRecv(1, 7, &r));  // taken once
  EXPECT_TRUE(q.empty());

  q.addMessage(3, ~0ull, std::make_unique<int>(42));  // the whole 64-bit tag is the key
  std::unique_ptr<int> m;
  EXPECT_FALSE(q.takeMessage(3, 0, &m));
  ASSERT_TRUE(q.takeMessage(3, ~0ull, &m));
  EXPECT_EQ(*m, 42);
  EXPECT_TRUE(q.empty());
}

TEST(MatchQueue, EqualKeysMatchOldestFirst) {
  Queue q;
  for (int i = 0; i < 5; ++i) {
    q.addMessage(0, 1, std::make_unique<int>(i));
    q.addMessage(0, 0, std::make_unique<int>(100 + i));  // interleaved with another key
  }
  std::unique_ptr<int> m;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(q.takeMessage(0, 1, &m));
    EXPECT_EQ(*m, i);
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(q.takeMessage(0, 0, &m));
    EXPECT_EQ(*m, 100 + i);
  }
  q.addRecv(2, 5, "first");
  q.addRecv(2, 5, "second");
  std::string r;
  ASSERT_TRUE(q.takeRecv(2, 5, &r));
  EXPECT_EQ(r, "first");
  ASSERT_TRUE(q.takeRecv(2, 5, &r));
  EXPECT_EQ(r, "second");
}

TEST(MatchQueue, ReceivesAndMessagesWaitApart) {
  // A receive does not match a waiting receive, nor a message a waiting message.
  Queue q;
  q.addRecv(0, 1, "r");
  std::unique_ptr<int> m;
  EXPECT_FALSE(q.takeMessage(0, 1, &m));
  q.addMessage(0, 1, std::make_unique<int>(1));
  std::string r;
  ASSERT_TRUE(q.takeRecv(0, 1, &r));
  ASSERT_TRUE(q.takeMessage(0, 1, &m));
  EXPECT_TRUE(q.empty());
}

TEST(MatchQueue, EraseFindAndPerSourceQueries) {
  Queue q;
  for (int src = 0; src < 3; ++src)
    for (uint64_t tag = 0; tag < 4; ++tag) {
      q.addRecv(src, tag, std::to_string(src) + "/" + std::to_string(tag));
      q.addMessage(src, tag + 10, std::make_unique<int>(src * 100 + static_cast<int>(tag)));
    }
  EXPECT_TRUE(q.hasRecvsFrom(1));
  int failed = 0;
  q.eraseRecvsIf([&](int src, uint64_t, std::string& r) {
    if (src != 1) return false;
    EXPECT_EQ(r.substr(0, 2), "1/");
    ++failed;
    return true;
  });
  EXPECT_EQ(failed, 4);
  EXPECT_FALSE(q.hasRecvsFrom(1));
  EXPECT_TRUE(q.hasRecvsFrom(0));
  EXPECT_TRUE(q.hasRecvsFrom(2));
  EXPECT_FALSE(q.hasRecvsFrom(5));

  int* found = nullptr;
  std::unique_ptr<int>* hit = q.findMessageIf(
      [](int src, uint64_t tag, const std::unique_ptr<int>&) { return src == 2 && tag == 12; });
  ASSERT_NE(hit, nullptr);
  found = hit->get();
  EXPECT_EQ(*found, 202);
  EXPECT_EQ(q.findMessageIf([](int, uint64_t, const std::unique_ptr<int>& m) { return *m == 999; }), nullptr);

  q.eraseMessagesIf([](int src, uint64_t, std::unique_ptr<int>& m) { return src == 0 || *m == 203; });
  std::unique_ptr<int> m;
  EXPECT_FALSE(q.takeMessage(0, 10, &m));
  EXPECT_FALSE(q.takeMessage(2, 13, &m));
  ASSERT_TRUE(q.takeMessage(2, 12, &m));
  EXPECT_EQ(m.get(), found);  // found in place, not copied
  ASSERT_TRUE(q.takeMessage(1, 11, &m));
  EXPECT_EQ(*m, 101);
}

}  // namespace
}  // namespace trib
