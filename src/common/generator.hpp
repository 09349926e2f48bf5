// Generator<T>: a minimal C++20 coroutine generator (std::generator arrives in C++23).
// Schedules are written as plain loops that co_yield steps; a rank's schedule is then
// produced lazily, so 4,608 ranks can be verified or simulated without storing them all.
#pragma once
#include <coroutine>
#include <exception>
#include <utility>

namespace trib {

template <typename T>
class Generator {
 public:
  struct promise_type {
    const T* current = nullptr;
    std::exception_ptr error;
    Generator get_return_object() {
      return Generator(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(const T& value) noexcept {
      current = &value;
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() { error = std::current_exception(); }
  };

  Generator() = default;
  explicit Generator(std::coroutine_handle<promise_type> h) : handle_(h) {}
  Generator(Generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Generator& operator=(Generator&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator() { reset(); }

  // Advances; returns false at the end. The value is valid until the next call.
  bool next() {
    if (!handle_ || handle_.done()) return false;
    handle_.resume();
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    return !handle_.done();
  }
  const T& value() const { return *handle_.promise().current; }

 private:
  void reset() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  std::coroutine_handle<promise_type> handle_;
};

}  // namespace trib
