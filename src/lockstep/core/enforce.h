// Error reporting: LOCKSTEP_ENFORCE* for broken invariants (file:line, "a vs b"), typed exceptions for
// failures a user can fix (bad input, I/O). The CLI catches Error and prints its message as one line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace lockstep {

// Base of every error lockstep throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file, database or socket could not be read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

// Input that parses but is wrong: a flag, a shape, a corrupt record or checkpoint.
class InvalidInput : public Error {
 public:
  using Error::Error;
};

// A write found its device out of space or quota: writing again fails until a person frees some.
class NoSpace : public IoError {
 public:
  using IoError::IoError;
};

// Throws IoError "<what>: <strerror(errno)>", or NoSpace (with what to do) when errno says the device is out
// of space or quota. Call it right after the failed system call, before errno changes.
[[noreturn]] void ThrowErrno(const std::string& what);

// Exit statuses of the command line, read by `lockstep launch`: a failure of kExitNotRetryable repeats
// however often the command runs again (InvalidInput: a flag, a checkpoint, a record, shards that disagree;
// NoSpace), so a supervisor stops; kExitFailure (I/O, a lost peer, a broken invariant) may not, so it
// restarts.
constexpr int kExitFailure = 1;
constexpr int kExitNotRetryable = 2;

[[noreturn]] void ThrowEnforce(const char* file, int line, const std::string& condition,
                               const std::string& message);

}  // namespace lockstep

#define LOCKSTEP_ENFORCE(condition, ...)                                                                     \
  do {                                                                                                       \
    if (!(condition)) ::lockstep::ThrowEnforce(__FILE__, __LINE__, #condition, fmt::format("" __VA_ARGS__)); \
  } while (0)

#define LOCKSTEP_ENFORCE_BINARY_(op, a, b, ...)                                               \
  do {                                                                                        \
    const auto& lockstep_a_ = (a);                                                            \
    const auto& lockstep_b_ = (b);                                                            \
    if (!(lockstep_a_ op lockstep_b_))                                                        \
      ::lockstep::ThrowEnforce(                                                               \
          __FILE__, __LINE__, #a " " #op " " #b,                                              \
          fmt::format("{} vs {}. ", lockstep_a_, lockstep_b_) + fmt::format("" __VA_ARGS__)); \
  } while (0)

#define LOCKSTEP_ENFORCE_EQ(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(==, a, b, __VA_ARGS__)
#define LOCKSTEP_ENFORCE_NE(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(!=, a, b, __VA_ARGS__)
#define LOCKSTEP_ENFORCE_LT(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(<, a, b, __VA_ARGS__)
#define LOCKSTEP_ENFORCE_LE(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(<=, a, b, __VA_ARGS__)
#define LOCKSTEP_ENFORCE_GT(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(>, a, b, __VA_ARGS__)
#define LOCKSTEP_ENFORCE_GE(a, b, ...) LOCKSTEP_ENFORCE_BINARY_(>=, a, b, __VA_ARGS__)
