#include "lockstep/core/stop_signals.h"

#include <signal.h>
#include <time.h>

namespace lockstep {
namespace {

volatile sig_atomic_t requested = 0;  // 0, or the signal that asked to stop
int64_t requested_ms = 0;             // when; written by the handler only
struct sigaction previous_int, previous_term;

void OnSignal(int signal) {
  const int64_t now = SignalClockMs();
  if (requested == 0) {
    requested = signal;
    requested_ms = now;
    return;
  }
  if (now - requested_ms < kRepeatedSignalMs) return;  // the first request again
  ::signal(signal, SIG_DFL);                           // a second request: as if there were no guard
  ::raise(signal);
}

}  // namespace

int64_t SignalClockMs() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
}

StopOnSignals::StopOnSignals() {
  requested = 0;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  action.sa_flags = SA_RESTART;  // the step in progress goes on undisturbed
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);  // one handler at a time: SIGTERM never interrupts the SIGINT one
  sigaddset(&action.sa_mask, SIGTERM);
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
