// The per-epoch CSV log in Caffe2's resnet50_trainer format:
// {model}_gpu{N}_b{batch}_L{labels}_lr{lr:.2f}_v2_{YYYYmmdd_HHMMSS}.log, first line "# " + arguments, then a
// header and one row per epoch.
#pragma once

#include <cstdio>
#include <string>

namespace lockstep {

struct EpochRecord {
  double time_spent = 0, cumulative_time_spent = 0;
  int64_t input_count = 0, cumulative_input_count = 0, cumulative_batch_count = 0;
  double accuracy = 0;
  int64_t epoch = 0;
  double learning_rate = 0, loss = 0;
  double test_accuracy = -1;  // -1 without test data
};

class CsvLog {
 public:
  static constexpr const char* kHeader =
      "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
      "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy";

  static std::string FileName(const std::string& model, int num_devices, int batch_size, int num_labels,
                              double learning_rate);
  // Creates the file in `directory`, never over an existing log: when a run that started in the same second
  // took the name, the next free "<name>_<k>.log" (k = 2, 3, ...).
  CsvLog(const std::string& directory, const std::string& file_name, const std::string& arguments);
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;

  void Append(const EpochRecord& record);  // written and flushed at once: a killed run keeps its rows
  const std::string& path() const { return path_; }

 private:
  static constexpr int kMaxSameNameRuns = 100;
  std::string path_;
  FILE* file_ = nullptr;
};

}  // namespace lockstep
