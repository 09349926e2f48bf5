// tribCommRegister / tribCommDeregister: bad input gets a clear error and changes nothing; memory
// kinds are told apart (host, registered, tribMemAlloc's shared memory).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "common/shared_alloc.hpp"
#include "core/registration.hpp"
#include "tributary/tributary.h"

namespace trib {
namespace {

bool contains(const Status& st, const char* what) { return st.message().find(what) != std::string::npos; }

TEST(Registrations, RefusesWhatItCannotRegister) {
  Registrations regs(1);
  std::vector<char> buf(4096);
  void* h = reinterpret_cast<void*>(1);
  EXPECT_TRUE(contains(regs.add(nullptr, 16, &h), "buff is NULL"));
  EXPECT_EQ(h, nullptr);  // a failed call leaves no handle behind
  EXPECT_TRUE(contains(regs.add(buf.data(), 0, &h), "size is 0"));
  EXPECT_TRUE(contains(regs.add(buf.data(), 16, nullptr), "handle is NULL"));
  EXPECT_TRUE(contains(regs.add(reinterpret_cast<void*>(UINTPTR_MAX - 8), 64, &h), "wraps"));
  // Freed (unmapped) memory.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(munmap(static_cast<char*>(m) + 2 * page, page), 0);  // a hole in the middle
  const Status st = regs.add(m, 4 * page, &h);
  EXPECT_EQ(st.code(), tribInvalidArgument);
  EXPECT_TRUE(contains(st, "is not mapped")) << st.message();
  EXPECT_TRUE(regs.add(m, 2 * page, &h).ok());  // the mapped part is fine
  munmap(m, 2 * page);
  munmap(static_cast<char*>(m) + 3 * page, page);
  EXPECT_EQ(regs.size(), 1u);
}

TEST(Registrations, OverlapsAreRefusedAndHandlesAreChecked) {
  Registrations mine(7), other(8);
  std::vector<char> buf(1 << 16);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_TRUE(mine.add(buf.data() + 1024, 1024, &a).ok());
  for (auto [off, len] : {std::pair{1024, 1024}, {0, 1025}, {2047, 10}, {1500, 1}, {0, 1 << 16}}) {
    const Status st = mine.add(buf.data() + off, len, &b);
    EXPECT_EQ(st.code(), tribInvalidArgument) << off << "+" << len;
    EXPECT_TRUE(contains(st, "overlaps the registration")) << st.message();
  }
  EXPECT_TRUE(mine.add(buf.data(), 1024, &b).ok());         // just below
  EXPECT_TRUE(mine.add(buf.data() + 2048, 1024, &c).ok());  // just above
  EXPECT_TRUE(mine.covers(buf.data() + 1024, 1024));
  EXPECT_TRUE(mine.covers(buf.data() + 1500, 10));
  EXPECT_FALSE(mine.covers(buf.data() + 1000, 100));  // straddles two registrations
  EXPECT_FALSE(mine.covers(buf.data() + 4096, 1));
  // Another communicator's handle, twice, NULL, a made-up one.
  EXPECT_TRUE(contains(other.remove(a), "not returned by this communicator"));
  EXPECT_TRUE(mine.remove(a).ok());
  EXPECT_TRUE(contains(mine.remove(a), "deregistered already"));
  EXPECT_TRUE(contains(mine.remove(nullptr), "handle is NULL"));
  EXPECT_FALSE(mine.covers(buf.data() + 1024, 1));
  EXPECT_TRUE(mine.add(buf.data() + 1024, 1024, &a).ok());  // the range is free again
  EXPECT_EQ(mine.size(), 3u);
}

TEST(Registrations, MemoryKinds) {
  Registrations regs(3);
  std::vector<float> heap(256);
  void* shared = nullptr;
  ASSERT_EQ(tribMemAlloc(&shared, 4096), tribSuccess);
  void* h = nullptr;
  ASSERT_TRUE(regs.add(heap.data(), 128 * sizeof(float), &h).ok());
  EXPECT_EQ(classifyMemory(heap.data(), 64 * sizeof(float), &regs), MemoryKind::Registered);
  EXPECT_EQ(classifyMemory(heap.data() + 200, 16, &regs), MemoryKind::Host);
  EXPECT_EQ(classifyMemory(shared, 4096, &regs), MemoryKind::HostShared);
  EXPECT_EQ(classifyMemory(shared, 4096, nullptr), MemoryKind::HostShared);
  EXPECT_EQ(classifyMemory(heap.data(), 16, nullptr), MemoryKind::Host);
  EXPECT_EQ(tribMemFree(shared), tribSuccess);
}

// Host memory that already is a shared file mapping is adopted at registration: it classifies as
// tribMemAlloc's does (peers map it and read it in place) until deregistered; a mapping that
// starts inside its file says where; tribMemFree refuses it; private memory stays Registered.
TEST(Registrations, SharedMappingsAreAdoptedUntilDeregistered) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // A memfd mapped from its second page, shared anonymous memory, private anonymous memory.
  const int fd = memfd_create("trib-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(4 * page)), 0);
  char* file = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, page));
  char* anon =
      static_cast<char*>(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  char* priv =
      static_cast<char*>(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(file, MAP_FAILED);
  ASSERT_NE(anon, MAP_FAILED);
  ASSERT_NE(priv, MAP_FAILED);
  EXPECT_EQ(classifyMemory(file + 100, 64, nullptr), MemoryKind::Host);
  {
    Registrations a(21), b(22);
    void *hf = nullptr, *ha = nullptr, *hp = nullptr, *hb = nullptr;
    ASSERT_TRUE(a.add(file + 100, page, &hf).ok());
    ASSERT_TRUE(a.add(anon, page, &ha).ok());
    ASSERT_TRUE(a.add(priv, page, &hp).ok());
    EXPECT_EQ(classifyMemory(file + 100, 64, &a), MemoryKind::HostShared);
    EXPECT_EQ(classifyMemory(file + page, page, nullptr), MemoryKind::HostShared);  // the whole mapping
    EXPECT_EQ(classifyMemory(anon, page, &a), MemoryKind::HostShared);
    EXPECT_EQ(classifyMemory(priv, page, &a), MemoryKind::Registered);
    SharedRegion r;
    ASSERT_TRUE(findSharedRegion(file + 100, 64, &r));
    EXPECT_EQ(r.offset, page + 100);  // in the file, where a peer maps it from
    EXPECT_EQ(r.mapBytes, 3 * page);
    EXPECT_EQ(tribMemFree(file), tribInvalidArgument);  // not tribMemAlloc's
    // A second communicator's registration of the same mapping keeps it adopted past the first's end.
    ASSERT_TRUE(b.add(file, 64, &hb).ok());
    ASSERT_TRUE(a.remove(hf).ok());
    EXPECT_EQ(classifyMemory(file + 100, 64, &b), MemoryKind::HostShared);
    ASSERT_TRUE(b.remove(hb).ok());
    EXPECT_EQ(classifyMemory(file + 100, 64, &b), MemoryKind::Host);
    EXPECT_FALSE(findSharedRegion(file, 1, &r));
    // A refused registration adopts nothing.
    EXPECT_FALSE(a.add(anon, 16, &hb).ok());  // overlaps ha
    EXPECT_TRUE(a.remove(ha).ok());
    EXPECT_EQ(classifyMemory(anon, page, nullptr), MemoryKind::Host);
    ASSERT_TRUE(a.add(anon, page, &ha).ok());
  }  // a's end ends its adoption of `anon`
  EXPECT_EQ(classifyMemory(anon, page, nullptr), MemoryKind::Host);
  munmap(file, 2 * page);
  munmap(anon, page);
  munmap(priv, page);
  close(fd);
}

}  // namespace
}  // namespace trib
