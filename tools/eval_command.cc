// `lockstep eval`: evaluates a checkpoint on test data with the trainer's model, data and devices.
#include "eval_command.h"

#include "train_command.h"

namespace lockstep {

void AddEvalFlags(CLI::App* app, EvalFlags* flags) {
  AddModelAndDataFlags(app, &flags->config, &flags->use_cpu);
  app->add_option("--load_model_path", flags->config.load_model_path,
                  "The checkpoint to evaluate (a .safetensors file the trainer saved); it is only read");
  app->add_option("--test_data", flags->config.test_data,
                  "Test data: the path of an image database (LMDB or LevelDB of Caffe Datum or Caffe2 "
                  "TensorProtos records), or fashion-mnist; every record is evaluated once");
  app->add_option("--predictions", flags->predictions,
                  "Write one row per record to this CSV: key,label,predicted_class,score (the softmax "
                  "probability of the predicted class)");
}

int RunEval(const CLI::App& app, EvalFlags flags) {
  TrainerConfig& c = flags.config;  // EvaluateCheckpoint says what is missing
  ResolveDevices(app, flags.use_cpu, &c);
  if (c.test_data == "fashion-mnist") ApplyFashionMnistGeometry(app, &c);
  EvaluationResult result = EvaluateCheckpoint(c, flags.predictions);
  fmt::print("{} records: loss {:.6f}, top-1 accuracy {:.6f} ({}), top-5 accuracy {:.6f} ({})\n",
             result.records, result.loss(), result.top1(), result.top1_correct, result.top5(),
             result.top5_correct);
  if (!flags.predictions.empty()) fmt::print("predictions: {}\n", flags.predictions);
  return 0;
}

}  // namespace lockstep
