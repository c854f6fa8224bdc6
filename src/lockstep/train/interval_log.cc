// Interval progress lines and the --iter_log CSV.
#include "lockstep/train/interval_log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <utility>

#include "lockstep/core/enforce.h"
#include "lockstep/core/output_directory.h"
#include "lockstep/train/event_file.h"

namespace lockstep {

namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

bool StartsWithHeader(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  return first == IntervalLog::kCsvHeader;
}

// Cuts the rows of the CSV's last run whose step (from their epoch, iteration and iterations columns) comes
// after `step`; returns how many. A run's rows go up in steps; a row at or below the one before starts a run.
int64_t DropRowsAfter(FILE* csv, const std::string& path, int64_t step) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  int64_t previous = -1, cut_at = -1, dropped = 0;
  for (std::streamoff at = in.tellg(); std::getline(in, line); at = in.tellg()) {
    int64_t epoch = 0, iteration = 0, iterations = 0;
    if (std::sscanf(line.c_str(), "%*[^,],%*[^,],%" SCNd64 ",%" SCNd64 ",%" SCNd64, &epoch, &iteration,
                    &iterations) != 3)
      continue;
    const int64_t row_step = (epoch - 1) * iterations + iteration;
    if (row_step <= previous) cut_at = -1, dropped = 0;  // a later run
    previous = row_step;
    if (row_step > step && cut_at < 0) cut_at = at;
    if (cut_at >= 0) ++dropped;
  }
  if (cut_at >= 0 && ftruncate(fileno(csv), cut_at) != 0)
    throw IoError(fmt::format("--iter_log {}: cannot drop the rows after step {}: {}", path, step,
                              std::strerror(errno)));
  return cut_at >= 0 ? dropped : 0;
}

}  // namespace

std::string DurationText(double seconds) {
  const int64_t s = std::llround(std::max(seconds, 0.0));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

IntervalLog::IntervalLog(IntervalLogOptions options) : options_(std::move(options)) {
  start_ = interval_start_ = Clock::now();
  if (options_.csv_path.empty()) return;
  csv_ = std::fopen(options_.csv_path.c_str(), "a");
  if (!csv_)
    throw IoError(fmt::format("--iter_log {}: cannot open it: {}", options_.csv_path, std::strerror(errno)));
  // Two runs appending to one log would interleave their rows.
  if (!LockForThisProcess(fileno(csv_))) {
    std::fclose(csv_);
    csv_ = nullptr;
    throw InvalidInput(fmt::format(
        "--iter_log {}: another running process writes this log; pass another file, or wait until that run "
        "ends",
        options_.csv_path));
  }
  std::fseek(csv_, 0, SEEK_END);
  if (std::ftell(csv_) == 0) {
    std::fprintf(csv_, "%s\n", kCsvHeader);
  } else if (!StartsWithHeader(options_.csv_path)) {  // rows go on only after rows of their own kind
    std::fclose(csv_);
    csv_ = nullptr;
    throw InvalidInput(fmt::format(
        "--iter_log {}: the file exists and is no iteration log (its first line is not the header {}); pass "
        "a new file, or the iteration log of the run this one resumes",
        options_.csv_path, kCsvHeader));
  } else if (options_.resumed_step > 0) {
    if (const int64_t dropped = DropRowsAfter(csv_, options_.csv_path, options_.resumed_step))
      fmt::print(
          "{}--iter_log {}: dropped {} row{} after step {}, where this run resumes (it trains those "
          "steps again)\n",
          options_.line_prefix, options_.csv_path, dropped, dropped == 1 ? "" : "s", options_.resumed_step);
  }
  std::fflush(csv_);
}

IntervalLog::~IntervalLog() {
  if (csv_) std::fclose(csv_);
}

bool IntervalLog::StepDone(int64_t job_iteration, bool ends_epoch) {
  const Clock::time_point now = Clock::now();
  if (++steps_ == 1) first_step_end_ = now;
  const bool interval_over =
      (options_.every_iters > 0 && job_iteration % options_.every_iters == 0) ||
      (options_.every_secs > 0 && Seconds(now - interval_start_) >= options_.every_secs);
  line_due_ = options_.to_stderr && interval_over;
  row_due_ = (csv_ || options_.events) && (interval_over || ends_epoch);
  return line_due_ || row_due_;
}

IntervalLog::Pace IntervalLog::PaceAt(const StepFigures& f, Clock::time_point now) const {
  Pace pace;
  const double interval = Seconds(now - interval_start_);
  if (interval > 0)
    pace.images_per_sec = (steps_ - interval_first_step_) * options_.images_per_step / interval;
  // The first step waits for the other shards and warms up; the ones after it show the pace.
  const double per_step =
      steps_ > 1 ? Seconds(now - first_step_end_) / (steps_ - 1) : Seconds(now - start_) / steps_;
  const int64_t epoch_left = options_.iterations_per_epoch - f.iteration;
  pace.epoch_eta = epoch_left * per_step;
  pace.run_eta = (epoch_left + (options_.num_epochs - f.epoch) * options_.iterations_per_epoch) * per_step;
  return pace;
}

void IntervalLog::Report(const StepFigures& f) {
  const Clock::time_point now = Clock::now();
  const Pace pace = PaceAt(f, now);
  if (line_due_) {
    std::string line = fmt::format(
        "{}{} epoch {}/{} iter {}/{}: {:.1f} img/s, loss {:.4f}, accuracy {:.4f}, lr {:.6g}, ETA epoch {}, "
        "run {}\n",
        options_.line_prefix, UtcNow(), f.epoch, options_.num_epochs, f.iteration,
        options_.iterations_per_epoch, pace.images_per_sec, f.loss, f.accuracy, f.learning_rate,
        DurationText(pace.epoch_eta), DurationText(pace.run_eta));
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  if (row_due_ && options_.events) {
    const int64_t step = (f.epoch - 1) * options_.iterations_per_epoch + f.iteration;
    for (const auto& [tag, value] : {std::pair<const char*, double>{"train/loss", f.loss},
                                     {"train/accuracy", f.accuracy},
                                     {"train/learning_rate", f.learning_rate},
                                     {"train/images_per_sec", pace.images_per_sec},
                                     {"train/epoch_eta_seconds", pace.epoch_eta},
                                     {"train/run_eta_seconds", pace.run_eta}})
      options_.events->Scalar(tag, step, value);
  }
  if (row_due_ && csv_) {
    const double unix_time =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::string row = fmt::format("{:.3f},{:.3f},{},{},{},{:.4f},{:.6f},{:.6f},{:.6g},{:.1f},{:.1f}\n",
                                  unix_time, options_.resumed_seconds + Seconds(now - start_), f.epoch,
                                  f.iteration, options_.iterations_per_epoch, pace.images_per_sec, f.loss,
                                  f.accuracy, f.learning_rate, pace.epoch_eta, pace.run_eta);
    if (std::fputs(row.c_str(), csv_) < 0 || std::fflush(csv_) != 0)
      throw IoError(
          fmt::format("--iter_log {}: cannot write it: {}", options_.csv_path, std::strerror(errno)));
  }
  interval_start_ = now;
  interval_first_step_ = steps_;
}

}  // namespace lockstep
