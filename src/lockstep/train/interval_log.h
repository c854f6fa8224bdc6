// Progress of a long run for job logs: every `every_secs` seconds and every `every_iters`-th step, a line on
// stderr and a row of a CSV file and of TensorBoard scalars (also at each epoch's end), each with the
// images/s of the interval, the last step's loss, accuracy and learning rate, and the time left in the epoch
// and in the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep {

class EventFile;

struct IntervalLogOptions {
  double every_secs = 0;    // 0: not by time
  int64_t every_iters = 0;  // 0: not by count
  bool to_stderr = false;
  std::string csv_path;  // "" for none; appended to, with the header first when the file is new or empty
  EventFile* events = nullptr;  // also writes the rows' figures there as TensorBoard scalars, when given
  std::string line_prefix;      // e.g. "shard 1: "
  int64_t images_per_step = 0;  // this machine's
  int64_t iterations_per_epoch = 0;
  int64_t num_epochs = 0;
  // A resumed run: the job's steps and seconds of training its checkpoint holds. The CSV's rows after that
  // step, left by the run that was cut short, are dropped (those steps are trained again), and
  // elapsed_seconds goes on from the checkpoint's training time.
  int64_t resumed_step = 0;
  double resumed_seconds = 0;
};

struct StepFigures {
  int64_t epoch = 0;      // 1-based
  int64_t iteration = 0;  // within the epoch, 1-based
  double loss = 0, accuracy = 0, learning_rate = 0;
};

class IntervalLog {
 public:
  static constexpr const char* kCsvHeader =
      "unix_time,elapsed_seconds,epoch,iteration,iterations,inputs_per_sec,loss,accuracy,learning_rate,"
      "epoch_eta_seconds,run_eta_seconds";

  // Starts the clocks; opens the CSV (throws IoError when it cannot).
  explicit IntervalLog(IntervalLogOptions options);
  ~IntervalLog();
  IntervalLog(const IntervalLog&) = delete;
  IntervalLog& operator=(const IntervalLog&) = delete;

  // Called after every step (`ends_epoch` for an epoch's last): whether a report is due. The caller reads the
  // step's figures only then, since on a GPU that waits for the step. `job_iteration` counts the job's steps
  // from its start, a resumed run's too, so that every_iters falls on the steps it would have without the
  // interruption. The CSV also gets a row at every epoch's end, so that a run shorter than --log_every_secs
  // still has its curve.
  bool StepDone(int64_t job_iteration, bool ends_epoch);
  // Writes what is due, the line and the row (flushed at once), and starts the next interval.
  void Report(const StepFigures& figures);

 private:
  using Clock = std::chrono::steady_clock;
  // Images/s over the interval; seconds left in the epoch and the run at the average pace since the first
  // step.
  struct Pace {
    double images_per_sec = 0, epoch_eta = 0, run_eta = 0;
  };
  Pace PaceAt(const StepFigures& figures, Clock::time_point now) const;

  IntervalLogOptions options_;
  FILE* csv_ = nullptr;
  Clock::time_point start_, first_step_end_, interval_start_;
  int64_t steps_ = 0, interval_first_step_ = 0;
  bool line_due_ = false, row_due_ = false;  // what StepDone found due
};

// "1:02:03": hours, minutes and seconds, rounded to the second.
std::string DurationText(double seconds);

}  // namespace lockstep
