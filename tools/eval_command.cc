// `lockstep eval`: evaluates a checkpoint on test data with the trainer's model, data and devices.
#include "eval_command.h"

#include "train_command.h"

namespace lockstep {

void AddEvalFlags(CLI::App* app, EvalFlags* flags) {
  AddTrainerFlags(app, &flags->config, /*train=*/false);
  app->add_option("--predictions", flags->predictions,
                  "Write one row per record to this CSV: key,label,predicted_class,score (the softmax "
                  "probability of the predicted class)");
  app->add_flag("--with_logits", flags->with_logits,
                "With --predictions: add each record's logits (the model's output before softmax) as columns "
                "logit_0 ... logit_{K-1}, with 9 significant digits (a float32 reads back exactly)")
      ->needs("--predictions");
}

int RunEval(const CLI::App& app, EvalFlags flags) {
  TrainerConfig& c = flags.config;  // EvaluateCheckpoint says what is missing
  const GivenOptions given = GivenFlags(app);
  ResolveDevices(given, &c);
  ResolveDataDefaults(c.test_data, given, &c);
  ResolveModelFromCheckpoint(given, /*train=*/false, &c);
  EvaluationResult result = EvaluateCheckpoint(c, flags.predictions, flags.with_logits);
  fmt::print("{} record{}: loss {:.6f}, top-1 accuracy {:.6f} ({}), top-5 accuracy {:.6f} ({})\n",
             result.records, result.records == 1 ? "" : "s", result.loss(), result.top1(),
             result.top1_correct, result.top5(), result.top5_correct);
  if (result.left_out > 0)
    fmt::print("left out {} bad record{} (--skip_bad_records)\n", result.left_out,
               result.left_out == 1 ? "" : "s");
  if (!flags.predictions.empty()) fmt::print("predictions: {}\n", flags.predictions);
  return 0;
}

}  // namespace lockstep
