// CSV log file creation and rows.
#include "lockstep/train/csv_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "lockstep/core/enforce.h"

namespace lockstep {

std::string CsvLog::FileName(const std::string& model, int num_devices, int batch_size, int num_labels,
                             double learning_rate) {
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d_%H%M%S", &local);
  return fmt::format("{}_gpu{}_b{}_L{}_lr{:.2f}_v2_{}.log", model, num_devices, batch_size, num_labels,
                     learning_rate, stamp);
}

CsvLog::CsvLog(const std::string& directory, const std::string& file_name, const std::string& arguments) {
  // A run that started in the same second (a restarted shard, say) may hold the name: take the next free one.
  const std::string stem = (directory.empty() ? "." : directory) + "/" + file_name;
  const size_t dot =
      stem.size() >= 4 && stem.compare(stem.size() - 4, 4, ".log") == 0 ? stem.size() - 4 : stem.size();
  int fd = -1;
  for (int k = 1; fd < 0 && k <= kMaxSameNameRuns; ++k) {
    path_ = k == 1 ? stem : fmt::format("{}_{}{}", stem.substr(0, dot), k, stem.substr(dot));
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno != EEXIST)
      throw IoError(fmt::format("cannot create log file {}: {}", path_, std::strerror(errno)));
  }
  if (fd < 0)
    throw IoError(
        fmt::format("cannot create log file {}: {} runs already took its name and every _<k> "
                    "variant; use another --log_dir",
                    stem, kMaxSameNameRuns));
  file_ = fdopen(fd, "w");
  std::fprintf(file_, "# %s\n%s\n", arguments.c_str(), kHeader);
  std::fflush(file_);
}

CsvLog::~CsvLog() {
  if (file_) std::fclose(file_);
}

void CsvLog::Append(const EpochRecord& r) {
  double inputs_per_sec = r.time_spent > 0 ? r.input_count / r.time_spent : 0.0;
  std::string row =
      fmt::format("{:.6f},{:.6f},{},{},{},{:.4f},{:.6f},{},{:.6g},{:.6f},{:.6f}\n", r.time_spent,
                  r.cumulative_time_spent, r.input_count, r.cumulative_input_count, r.cumulative_batch_count,
                  inputs_per_sec, r.accuracy, r.epoch, r.learning_rate, r.loss, r.test_accuracy);
  if (std::fputs(row.c_str(), file_) < 0 || std::fflush(file_) != 0)
    throw IoError(fmt::format("cannot write log file {}: {}", path_, std::strerror(errno)));
}

}  // namespace lockstep
