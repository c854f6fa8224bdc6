// Ctrl-C and SIGTERM as a request to stop a one-process training run between two steps, so that the run can
// write a checkpoint of where it stopped instead of dying mid-step with an epoch's work lost.
#pragma once

namespace lockstep {

// While alive, SIGINT and SIGTERM set the stop request instead of ending the process; a second one ends it
// at once, as without the guard. The previous handlers come back when it is destroyed.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

// The signal that asked training to stop, or 0; cheap enough to read after every step.
int StopRequested();

}  // namespace lockstep
