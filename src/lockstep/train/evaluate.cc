// The evaluation loop and the predictions file.
#include "lockstep/train/evaluate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lockstep/core/enforce.h"
#include "lockstep/core/net.h"
#include "lockstep/core/workspace.h"

namespace lockstep {

namespace {

// The blob as a plain row-major host tensor: itself, or a copy in `storage` when it lives in a backend layout
// or in device memory.
const Tensor& PlainOnHost(const Tensor& blob, Tensor* storage) {
  if (blob.is_plain() && blob.on_host()) return blob;
  blob.ToPlain(storage);
  return *storage;
}

// Scores one record from its logits (num_classes of them): the softmax and cross-entropy in double, the
// accuracy with Caffe2's tie rule (a label counts when fewer than k logits are strictly greater).
void ScoreRecord(const float* logits, int64_t num_classes, int32_t label, RecordPrediction* prediction,
                 EvaluationResult* result) {
  LOCKSTEP_ENFORCE(label >= 0 && label < num_classes, "label {} outside [0, {})", label, num_classes);
  const float own = logits[label];
  int64_t greater = 0, best = 0;
  for (int64_t j = 0; j < num_classes; ++j) {
    greater += logits[j] > own;
    if (logits[j] > logits[best]) best = j;
  }
  double sum = 0;
  for (int64_t j = 0; j < num_classes; ++j) sum += std::exp(double{logits[j]} - logits[best]);
  result->loss_sum += logits[best] + std::log(sum) - own;
  result->top1_correct += greater < 1;
  result->top5_correct += greater < 5;
  ++result->records;
  prediction->label = label;
  prediction->predicted_class = static_cast<int32_t>(best);
  prediction->score = static_cast<float>(1 / sum);
  prediction->logits = logits;
  prediction->num_classes = num_classes;
}

}  // namespace

EvaluationResult Evaluate(Workspace* ws, Net* test_net, const std::vector<TestReplica>& replicas,
                          BatchSource* source, int batch_size,
                          const std::function<void(const RecordPrediction&)>& on_record) {
  LOCKSTEP_ENFORCE(!replicas.empty() && batch_size > 0, "evaluation needs replicas and a positive batch");
  const int64_t total = source->size();
  const int64_t num_replicas = static_cast<int64_t>(replicas.size());
  EvaluationResult result;
  Tensor logits_storage, labels_storage;
  for (int64_t first = 0; first < total; first += batch_size) {
    const int64_t end = std::min<int64_t>(first + batch_size, total);
    // A full batch divides evenly (the configuration checks it); the tail is rounded up and padded.
    const int64_t slice = (end - first + num_replicas - 1) / num_replicas;
    for (int64_t r = 0; r < num_replicas; ++r)
      source->Fill(first + r * slice, slice, ws->CreateBlob(replicas[r].data),
                   ws->CreateBlob(replicas[r].label));
    test_net->Run();
    for (int64_t r = 0; r < num_replicas; ++r) {
      const Tensor& logits = PlainOnHost(ws->Blob(replicas[r].logits), &logits_storage);
      const Tensor& labels = PlainOnHost(ws->Blob(replicas[r].label), &labels_storage);
      LOCKSTEP_ENFORCE(logits.ndim() == 2 && logits.dim(0) == slice, "logits {} for a slice of {} records",
                       ShapeToString(logits.shape()), slice);
      const int64_t num_classes = logits.dim(1);
      for (int64_t i = 0; i < slice && first + r * slice + i < end; ++i) {
        if (labels.data<int32_t>()[i] == kLeftOutLabel) {
          ++result.left_out;
          continue;
        }
        RecordPrediction prediction;
        prediction.position = first + r * slice + i;
        ScoreRecord(logits.data<float>() + i * num_classes, num_classes, labels.data<int32_t>()[i],
                    &prediction, &result);
        if (on_record) on_record(prediction);
      }
    }
  }
  if (result.records == 0 && result.left_out > 0)
    throw InvalidInput(fmt::format(
        "none of the {} records of the test data can be used (--skip_bad_records left each out); check "
        "--db_type, --num_channels and the records",
        result.left_out));
  return result;
}

namespace {

// A key as a CSV field: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

PredictionsCsv::PredictionsCsv(const std::string& path, bool with_logits)
    : file_(path, "predictions file"), with_logits_(with_logits) {}

void PredictionsCsv::Append(const std::string& key, const RecordPrediction& prediction) {
  if (!header_written_) {
    pending_ += "key,label,predicted_class,score";
    for (int64_t j = 0; with_logits_ && j < prediction.num_classes; ++j)
      pending_ += fmt::format(",logit_{}", j);
    pending_ += "\n";
    header_written_ = true;
  }
  pending_ += fmt::format("{},{},{},{:.9g}", CsvField(key), prediction.label, prediction.predicted_class,
                          prediction.score);
  for (int64_t j = 0; with_logits_ && j < prediction.num_classes; ++j)
    pending_ += fmt::format(",{:.9g}", prediction.logits[j]);
  pending_ += "\n";
  if (pending_.size() >= (1 << 20)) {
    file_.Write(pending_);
    pending_.clear();
  }
}

void PredictionsCsv::Commit() {
  if (!header_written_) pending_ = "key,label,predicted_class,score\n";  // no record: the header alone
  file_.Write(pending_);
  pending_.clear();
  file_.Commit();
}

}  // namespace lockstep
