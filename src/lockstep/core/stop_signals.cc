#include "lockstep/core/stop_signals.h"

#include <signal.h>

namespace lockstep {
namespace {

volatile sig_atomic_t requested = 0;  // 0, or the signal that asked to stop
struct sigaction previous_int, previous_term;

void OnSignal(int signal) {
  if (requested != 0) {  // the second request: as if there were no guard
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  requested = signal;
}

}  // namespace

StopOnSignals::StopOnSignals() {
  requested = 0;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  action.sa_flags = SA_RESTART;  // the step in progress goes on undisturbed
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

int StopRequested() { return requested; }

const char* StopSignalName(int signal) { return signal == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM"; }

}  // namespace lockstep
