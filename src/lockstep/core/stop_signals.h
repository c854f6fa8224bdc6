// Ctrl-C and SIGTERM as a request to stop: training stops between two steps and writes a checkpoint of
// where it stopped (train/stop_vote.h) instead of dying mid-step with an epoch's work lost, and a wait for
// other processes gives up (Stopped).
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/enforce.h"

namespace lockstep {

// While alive, SIGINT and SIGTERM set the stop request instead of ending the process; a second one ends it
// at once, as without the guard, unless it comes within kRepeatedSignalMs of the first. The previous handlers
// come back when it is destroyed.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

// A stop signal this soon after the one before is the same request delivered twice, not a second Ctrl-C:
// timeout(1) signals its child and then the child's process group, as a terminal may.
constexpr int64_t kRepeatedSignalMs = 1000;

// CLOCK_MONOTONIC in milliseconds; safe in a signal handler.
int64_t SignalClockMs();

// The signal that asked this process to stop, or 0; cheap enough to read after every step.
int StopRequested();

// A wait that gave up because the process was asked to stop; the command line exits 128 + signal.
class Stopped : public Error {
 public:
  Stopped(int signal, const std::string& what) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// "SIGINT (Ctrl-C)" or "SIGTERM".
const char* StopSignalName(int signal);

}  // namespace lockstep
