// Progress line drawing.
#include "lockstep/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace lockstep {

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled) {}

void ProgressLine::Update(int64_t epoch, int64_t num_epochs, int64_t iteration, int64_t iterations,
                          double images_per_sec, double loss) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && iteration < iterations && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  std::fputs(fmt::format("\repoch {}/{}  iter {}/{}  {:.1f} img/s  loss {:.4f}\x1b[K", epoch, num_epochs,
                         iteration, iterations, images_per_sec, loss)
                 .c_str(),
             stderr);
  std::fflush(stderr);
}

void ProgressLine::Finish() {
  if (enabled_ && drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace lockstep
