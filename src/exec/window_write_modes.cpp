#include "exec/window_write_modes.hpp"

namespace trib {

namespace {
int sizeClass(uint64_t bytes) { return 63 - __builtin_clzll(bytes); }
}  // namespace

// Per size class: the first two runs (first touch of the buffers, cold caches) write plainly and
// are not timed; the next eight alternate (one slow sample must not decide); from then on the 1st
// of every 16 streams and the 2nd writes plainly, and the others take the faster.
bool WindowWriteModes::choose(uint64_t bytes) {
  if (forced_ >= 0) return forced_ != 0;
  if (bytes < kMeasuredFromBytes) return false;
  std::lock_guard<std::mutex> lock(mu_);
  SizeClass& c = classes_[sizeClass(bytes)];
  const uint64_t n = c.runs++;
  if (n < 10) return n >= 2 && n % 2 == 0;
  if (n % 16 == 0) return true;
  if (n % 16 == 1) return false;
  return c.nsPerByte[1] < c.nsPerByte[0];
}

void WindowWriteModes::record(uint64_t bytes, bool streaming, double ns) {
  if (!measures(bytes)) return;
  std::lock_guard<std::mutex> lock(mu_);
  SizeClass& c = classes_[sizeClass(bytes)];
  if (c.runs <= 2) return;  // one of the untimed first two (runs finish in order)
  double& avg = c.nsPerByte[streaming ? 1 : 0];
  avg = avg == 0 ? ns / bytes : 0.5 * avg + 0.5 * ns / bytes;
}

}  // namespace trib
