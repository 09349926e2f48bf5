// Stream ordering: how a stream-ordered call meets the caller's stream (NCCL's semantics: the call
// returns at once; work enqueued on the stream before it is done before it starts; work enqueued
// after it waits for it). The call's thread marks its start and its end on the stream with a
// ticket; the communicator's progress thread (exec/stream_progress.hpp) waits until the stream
// reaches the start, runs the call's executions, then releases the end.
// CUDA: stream memory operations on mapped host words (src/cuda/cuda_stream.cu). Host: a queue of
// closures on a thread standing in for a stream (exec/host_stream.hpp), for CPU tests.
#pragma once
#include <cstdint>

#include "common/status.hpp"

namespace trib {

class StreamOrdering {
 public:
  virtual ~StreamOrdering() = default;
  virtual const char* name() const = 0;
  // Caller's thread, at the call: once the work `stream` holds now is done, reached(ticket).
  virtual Status markStart(void* stream, uint32_t ticket) = 0;
  // Caller's thread, after markStart: the stream's later work waits for release(ticket).
  virtual Status holdUntilDone(void* stream, uint32_t ticket) = 0;
  // Progress thread: whether the stream has passed markStart(ticket).
  virtual bool reached(uint32_t ticket) = 0;
  // Progress thread: lets the stream go on past holdUntilDone(t) for every t <= ticket (tickets are
  // released in order, so one word says it; compared modulo 2^32).
  virtual void release(uint32_t ticket) = 0;
  // The first ticket to hand out (words that a stream may still read are never reset).
  virtual uint32_t firstTicket() const { return 1; }
  // How many tickets may be unreleased at once (the start words form a ring of this size).
  static constexpr uint32_t kRing = 1024;
};

}  // namespace trib
