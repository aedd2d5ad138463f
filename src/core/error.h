// core/error.h: recoverable errors as values (Error, Expected<T>, Status).
//
// Parsers, loaders and configuration readers return Expected<T>; only the command line turns an
// Error into a message and an exit code. Messages follow one shape: start lowercase, no trailing
// period, say where (file:line, node id, key), what was found and what was expected.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace orrery {

enum class ErrorKind : uint8_t {
  kInvalidArgument,  // a flag or value the user gave
  kIo,               // a file that cannot be opened, read or written
  kParse,            // bytes that do not decode (truncated, corrupt, wrong format)
  kConfig,           // a configuration file that decodes but is inconsistent
  kTrace,            // a trace that decodes but breaks the Chakra rules
  kTopology,         // a network description that cannot be built
  kDeadlock,         // a simulation that cannot finish
};

// One recoverable error: a kind and a complete, human-readable message.
class Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  template <typename... Args>
  static Error make(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
    return Error(kind, fmt::format(format, std::forward<Args>(args)...));
  }

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message starts with `prefix: ` (a file name, a rank, a key path).
  Error with_context(std::string_view prefix) const {
    return Error(kind_, fmt::format("{}: {}", prefix, message_));
  }

 private:
  ErrorKind kind_;
  std::string message_;
};

// A value of type T or an Error. Check with `if (!result)` before taking the value.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : storage_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  explicit operator bool() const { return std::holds_alternative<T>(storage_); }
  bool has_value() const { return std::holds_alternative<T>(storage_); }

  T& value() & {
    assert(has_value() && "Expected::value() on an error");
    return std::get<T>(storage_);
  }
  const T& value() const& {
    assert(has_value() && "Expected::value() on an error");
    return std::get<T>(storage_);
  }
  T&& value() && {
    assert(has_value() && "Expected::value() on an error");
    return std::get<T>(std::move(storage_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!has_value() && "Expected::error() on a value");
    return std::get<Error>(storage_);
  }

 private:
  std::variant<T, Error> storage_;
};

// Success or an Error, for operations that produce nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  static Status ok() { return Status(); }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_ && "Status::error() on success");
    return error_;
  }

 private:
  Error error_{ErrorKind::kInvalidArgument, ""};
  bool ok_ = true;
};

}  // namespace orrery
