// Status: a result code plus a message that names what went wrong and what to do.
// Internal code returns Status; the C ABI turns it into tribResult_t + tribGetLastError().
#pragma once
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "tributary/tributary.h"

namespace trib {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(tribResult_t code, std::string message)
      : code_(code),
        message_(code == tribSuccess ? nullptr : std::make_shared<std::string>(std::move(message))) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == tribSuccess; }
  tribResult_t code() const { return code_; }
  const std::string& message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }
  // Prefix context ("rank 3: ") to an error; no-op on success.
  Status& prefix(const std::string& context) {
    if (message_) message_ = std::make_shared<std::string>(context + *message_);
    return *this;
  }

 private:
  tribResult_t code_ = tribSuccess;
  std::shared_ptr<const std::string> message_;
};

// printf-style error construction: errorf(tribInvalidArgument, "count %zu too large", n).
Status errorf(tribResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace trib

#define TRIB_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::trib::Status trib_status_ = (expr);        \
    if (!trib_status_.ok()) return trib_status_; \
  } while (0)
