// Two-sided message matching, shared by the transports that match messages themselves (loopback,
// shm; verbs next): receives posted before their message, and messages that arrived before their
// receive, both keyed by (source rank, tag) exactly (transport.hpp). Entries with one key are
// matched oldest first, so two messages with the same tag from one source cannot overtake.
//
// Not thread-safe: the transport holds its own lock around every call. A posted receive or an
// unexpected message is the transport's own record (what to deliver into, or the bytes or
// descriptor that arrived); the queue only pairs them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <utility>

namespace trib {

template <class Recv, class Msg>
class MatchQueue {
 public:
  // A receive is posted: takes the oldest message that arrived with its key into *msg.
  bool takeMessage(int source, uint64_t tag, Msg* msg) { return take(messages_, source, tag, msg); }
  // ... and none had: the receive waits.
  void addRecv(int source, uint64_t tag, Recv r) { recvs_.emplace(Key{source, tag}, std::move(r)); }
  // A message arrives: takes the oldest receive posted with its key into *r.
  bool takeRecv(int source, uint64_t tag, Recv* r) { return take(recvs_, source, tag, r); }
  // ... and none was: the message waits (unexpected).
  void addMessage(int source, uint64_t tag, Msg m) { messages_.emplace(Key{source, tag}, std::move(m)); }

  // Removes the entries for which pred(source, tag, entry) is true (failures, aborts).
  void eraseRecvsIf(const std::function<bool(int, uint64_t, Recv&)>& pred) { eraseIf(recvs_, pred); }
  void eraseMessagesIf(const std::function<bool(int, uint64_t, Msg&)>& pred) { eraseIf(messages_, pred); }
  // The first waiting message for which pred(source, tag, message) is true, or nullptr.
  Msg* findMessageIf(const std::function<bool(int, uint64_t, const Msg&)>& pred) {
    for (auto& [key, m] : messages_)
      if (pred(key.first, key.second, m)) return &m;
    return nullptr;
  }
  // Whether a receive from `source` waits (a lost peer with work left behind is worth a warning).
  bool hasRecvsFrom(int source) const {
    auto it = recvs_.lower_bound(Key{source, 0});
    return it != recvs_.end() && it->first.first == source;
  }
  bool empty() const { return recvs_.empty() && messages_.empty(); }

 private:
  using Key = std::pair<int, uint64_t>;
  // Ordered, so that entries with equal keys keep their insertion order (multimap inserts at the
  // end of the equal range) and lower_bound finds the oldest; one node per entry.
  template <class T>
  using Table = std::multimap<Key, T>;

  template <class T>
  static bool take(Table<T>& t, int source, uint64_t tag, T* out) {
    auto it = t.lower_bound(Key{source, tag});
    if (it == t.end() || it->first != Key{source, tag}) return false;
    *out = std::move(it->second);
    t.erase(it);
    return true;
  }
  template <class T>
  static void eraseIf(Table<T>& t, const std::function<bool(int, uint64_t, T&)>& pred) {
    for (auto it = t.begin(); it != t.end();)
      it = pred(it->first.first, it->first.second, it->second) ? t.erase(it) : std::next(it);
  }

  Table<Recv> recvs_;
  Table<Msg> messages_;
};

}  // namespace trib
