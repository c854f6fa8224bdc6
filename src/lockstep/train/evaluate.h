// Evaluation of a model on test data: every record once, each replica a slice of every batch, with the loss,
// top-1 and top-5 accuracy and each record's prediction. Shared by the trainer's evaluation after each epoch
// and `lockstep eval`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/core/atomic_file.h"
#include "lockstep/data/batch_source.h"

namespace lockstep {

class Net;
class Workspace;

// One replica's forward pass in test mode: the blobs the evaluation fills and the logits it reads.
struct TestReplica {
  std::string data, label, logits;
};

struct RecordPrediction {
  int64_t position = 0;  // in the source's order, in [0, size)
  int32_t label = 0;
  int32_t predicted_class = 0;    // the highest logit, the first one among equals
  float score = 0;                // softmax probability of predicted_class
  const float* logits = nullptr;  // (num_classes), valid only during the on_record call
  int64_t num_classes = 0;
};

struct EvaluationResult {
  int64_t records = 0;
  int64_t left_out = 0;  // bad records --skip_bad_records left out, which the figures do not count
  int64_t top1_correct = 0, top5_correct = 0;  // ties count as Caffe2's Accuracy counts them
  double loss_sum = 0;                         // cross-entropy of the softmax, summed over records
  double loss() const { return records > 0 ? loss_sum / records : 0; }
  double top1() const { return records > 0 ? static_cast<double>(top1_correct) / records : 0; }
  double top5() const { return records > 0 ? static_cast<double>(top5_correct) / records : 0; }
};

// Runs test_net over the source's records [0, size) in batches of batch_size (the last one shorter), each
// replica reading an equal slice of a batch; a tail that does not divide among the replicas is padded with
// records from the start of the source, whose outputs are not counted. Calls on_record (when given) for
// every record in order. Throws InvalidInput when every record is a bad one left out.
EvaluationResult Evaluate(Workspace* ws, Net* test_net, const std::vector<TestReplica>& replicas,
                          BatchSource* source, int batch_size,
                          const std::function<void(const RecordPrediction&)>& on_record = {});

// A CSV of predictions, "key,label,predicted_class,score", with_logits followed by the record's logits
// "logit_0,...,logit_{K-1}" (9 significant digits: a float32 reads back exactly), written to a temporary name
// and renamed to `path` by Commit(), so `path` never holds a partial file. Throws IoError when it cannot be
// written.
class PredictionsCsv {
 public:
  explicit PredictionsCsv(const std::string& path, bool with_logits = false);
  void Append(const std::string& key, const RecordPrediction& prediction);
  void Commit();

 private:
  AtomicFile file_;
  bool with_logits_;
  bool header_written_ = false;  // the logits' columns are known from the first record
  std::string pending_;          // rows not written yet
};

}  // namespace lockstep
