// A one-line progress display on a terminal (iteration, images/sec, loss), silent when stderr is not one.
#pragma once

#include <chrono>
#include <string>

namespace lockstep {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  // Redraws at most ~10 times a second.
  void Update(int64_t epoch, int64_t num_epochs, int64_t iteration, int64_t iterations, double images_per_sec,
              double loss);
  void Finish();  // ends the line so later output starts clean
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

bool StderrIsTerminal();

}  // namespace lockstep
