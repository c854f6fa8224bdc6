// The trainer's memory plan at start-up: what each device's tensors will take, the largest batch that fits
// the limit (--plan_memory), and a stop before the first step when the plan does not fit.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lockstep/parallel/memory_plan.h"
#include "lockstep/train/evaluate.h"
#include "lockstep/train/trainer_config.h"

namespace lockstep {

// The shapes of what the training reader gives each replica (data, label), which the plan needs; empty with
// micro-batches, whose slices the plan then leaves unsized.
std::map<std::string, TensorShape> TrainingInputShapes(const TrainerConfig& config);

// Prints the plan: the peak of host memory (the CPU devices' tensors and what the process already uses), of
// each GPU, and each device's share. With --plan_memory also the largest --batch_size that fits, from the
// plan at twice the batch (plan_at). Throws InvalidInput when a memory's peak passes its limit:
// --memory_limit_gb, else the machine's memory for the host and a GPU's own.
void ReportMemoryPlan(const TrainerConfig& config, const MemoryPlan& plan,
                      const std::function<MemoryPlan(int batch_size)>& plan_at);

// The training plan with the evaluation net's activations added to each device: evaluation runs between
// steps, while the training net's buffers stay allocated.
MemoryPlan WithEvaluation(MemoryPlan training, const MemoryPlan& evaluation);

// Plans the evaluation net's memory too (with --share_buffers every blob but the replicas' logits, which
// Evaluate reads, may share, and ReLUs fold into the ops beside them as the training net's do; init_net makes
// the parameters it reads) and returns its plan.
MemoryPlan PlanEvaluationNet(const TrainerConfig& config, const std::vector<std::string>& scopes,
                       const std::vector<TestReplica>& replicas, const NetDef& init_net, NetDef* net);

}  // namespace lockstep
