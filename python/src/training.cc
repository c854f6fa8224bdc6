// What a training program needs beyond graphs: the trainer's option table (the same flags as the command
// line), the shards of a multi-machine job, checkpoints in the trainer's safetensors format, their export to
// ONNX, the readers' streams and the CSV log.
#include <pybind11/chrono.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "bindings.h"
#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/launcher.h"
#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/workspace.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/ops/store_handler.h"
#include "lockstep/parallel/fingerprint.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/csv_log.h"
#include "lockstep/train/onnx_checkpoint.h"
#include "lockstep/train/run_outputs.h"
#include "lockstep/train/trainer_options.h"
#include "lockstep/train/training_events.h"

namespace lockstep::python {
namespace {

using namespace pybind11::literals;

void BindOptions(py::module_& m) {
  py::class_<TrainerConfig>(m, "TrainerConfig")
      .def(py::init<>())
      .def("set", [](TrainerConfig& c, const std::string& name,
                     const std::string& value) { SetOption(&c, name, value); })
      .def("get", [](const TrainerConfig& c,
                     const std::string& name) { return OptionText(c, FindTrainerOption(name)); })
      .def("resolve",
           [](TrainerConfig& c, const std::set<std::string>& given) { ResolveTrainerConfig(given, &c); })
      .def("validate", &ValidateTrainerConfig)
      .def_readwrite("arguments", &TrainerConfig::arguments)
      .def_property_readonly("device_type",
                             [](const TrainerConfig& c) { return static_cast<int>(c.device_type); });
  m.def("trainer_options", [] {
    TrainerConfig defaults;
    py::list options;
    for (const TrainerOption& o : TrainerOptions())
      options.append(py::dict("name"_a = o.name, "help"_a = o.help, "default"_a = OptionText(defaults, o),
                              "flag"_a = IsFlag(o), "list"_a = IsList(o), "integer"_a = IsInteger(o),
                              "numeric"_a = IsNumeric(o),
                              "range"_a = IsNumeric(o) ? RangeText(o) : std::string()));
    return options;
  });
  m.def("limit_steps_per_epoch", &LimitStepsPerEpoch, "iterations"_a);
  // The claim on the checkpoint name: hold it while the run lives (None where this shard saves none).
  py::class_<CheckpointClaim>(m, "CheckpointClaim");
  m.def("prepare_run_outputs", &PrepareRunOutputs, "config"_a);
  m.def("launcher_shards", []() -> py::object {
    auto shards = ShardsFromLauncher();
    if (!shards) return py::none();
    return py::dict("shard_id"_a = shards->shard_id, "num_shards"_a = shards->num_shards,
                    "launcher"_a = shards->launcher, "job_id"_a = shards->job_id);
  });
}

// A shard's connection to the others: the rendezvous it met them through and the Gloo communicator, which
// the workspace holds as a Communicator object for the collectives' CreateCommonWorld.
struct Shards {
  std::shared_ptr<Rendezvous> rendezvous;
  std::shared_ptr<GlooCommunicator> gloo;
};

std::shared_ptr<Shards> ConnectShards(Workspace& ws, const std::string& object, const RendezvousOptions& meet,
                                      const GlooOptions& network) {
  auto shards = std::make_shared<Shards>();
  shards->gloo = std::make_shared<GlooCommunicator>(network, meet.num_shards);  // bad options fail first
  py::gil_scoped_release release;
  shards->rendezvous = std::make_shared<Rendezvous>(meet);
  shards->gloo->Connect(shards->rendezvous);
  ws.SetObject<Communicator>(object, shards->gloo);
  return shards;
}

void BindShards(py::module_& m) {
  py::class_<RendezvousOptions>(m, "RendezvousOptions")
      .def(py::init<>())
      .def_readwrite("num_shards", &RendezvousOptions::num_shards)
      .def_readwrite("shard_id", &RendezvousOptions::shard_id)
      .def_readwrite("run_id", &RendezvousOptions::run_id)
      .def_readwrite("redis_host", &RendezvousOptions::redis_host)
      .def_readwrite("redis_port", &RendezvousOptions::redis_port)
      .def_readwrite("file_store_path", &RendezvousOptions::file_store_path)
      .def_readwrite("timeout", &RendezvousOptions::timeout);
  py::class_<GlooOptions>(m, "GlooOptions")
      .def(py::init<>())
      .def_readwrite("transport", &GlooOptions::transport)
      .def_readwrite("interfaces", &GlooOptions::interfaces)
      .def_readwrite("algorithm", &GlooOptions::algorithm)
      .def_readwrite("timeout", &GlooOptions::timeout)
      .def_readwrite("first_iter_timeout", &GlooOptions::first_iter_timeout);
  py::class_<Shards, std::shared_ptr<Shards>>(m, "Shards")
      .def_property_readonly("description", [](const Shards& s) { return s.rendezvous->description(); })
      .def("end_first_iteration", [](Shards& s) { s.gloo->EndFirstIteration(); })
      .def("report_failure",
           [](Shards& s, const std::string& what) { s.rendezvous->ReportFailure(-1, what); })
      .def("agree_on_model",
           [](Shards& s, const ModelHelper& model, const DataParallelModel& parallel,
              const std::vector<std::pair<std::string, std::string>>& extra) {
             Fingerprint fingerprint = ModelFingerprint(model, parallel);
             fingerprint.insert(fingerprint.end(), extra.begin(), extra.end());
             py::gil_scoped_release release;
             AgreeOnModel(s.rendezvous.get(), fingerprint);
           })
      .def("close", [](Shards& s) {
        py::gil_scoped_release release;
        s.gloo->Close();
      });
  m.def("connect_shards", &ConnectShards, "workspace"_a, "object"_a, "rendezvous"_a, "network"_a);
  m.attr("RUN_ID_WITHOUT_PREFIX") = kRunIdWithoutPrefix;
}

// The trainer state's counters by name, as the checkpoint's metadata names them.
const std::map<std::string, int64_t TrainerState::*>& StateCounters() {
  static const std::map<std::string, int64_t TrainerState::*> counters = {
      {"epochs_done", &TrainerState::epochs_done},
      {"iteration", &TrainerState::iteration},
      {"epoch_iteration", &TrainerState::epoch_iteration},
      {"reader_position", &TrainerState::reader_position},
      {"images_trained", &TrainerState::images_trained},
      {"shard_images_trained", &TrainerState::shard_images_trained},
      {"training_milliseconds", &TrainerState::training_milliseconds}};
  return counters;
}

TrainerState StateFromDict(const py::dict& d) {
  TrainerState s;
  for (const auto& [key, value] : d) {
    const std::string name = key.cast<std::string>();
    if (name == "model") {
      s.model.name = value.cast<std::string>();
    } else if (name == "seed") {
      s.seed = value.cast<uint64_t>();
    } else if (auto counter = StateCounters().find(name); counter != StateCounters().end()) {
      s.*(counter->second) = value.cast<int64_t>();
    } else if (auto geometry = std::find_if(std::begin(kModelGeometry), std::end(kModelGeometry),
                                            [&](const GeometryField& g) { return name == g.name; });
               geometry != std::end(kModelGeometry)) {
      s.model.*(geometry->field) = value.cast<int>();
    } else {
      throw InvalidInput(fmt::format("unknown checkpoint state '{}'", name));
    }
  }
  return s;
}

py::dict StateToDict(const TrainerState& s) {
  py::dict d("model"_a = s.model.name, "seed"_a = s.seed);
  for (const auto& [name, field] : kModelGeometry) d[py::str(name)] = s.model.*field;
  for (const auto& [name, counter] : StateCounters()) d[py::str(name)] = s.*counter;
  return d;
}

void BindCheckpoints(py::module_& m) {
  m.def("checkpoint_path", &CheckpointPath, "directory"_a, "name"_a, "epoch"_a);
  m.def(
      "latest_checkpoint",
      [](const std::string& directory, const std::string& name) {
        std::vector<std::string> skipped;
        std::string path = LatestCheckpoint(directory, name, &skipped);
        return py::make_tuple(path, skipped);
      },
      "directory"_a, "name"_a);
  m.def(
      "save_checkpoint",
      [](const std::string& path, const Workspace& ws, const std::string& scope,
         const std::vector<std::string>& names, const py::dict& state) {
        TrainerState s = StateFromDict(state);
        py::gil_scoped_release release;
        SaveCheckpoint(path, ws, scope, names, s);
      },
      "path"_a, "workspace"_a, "scope"_a, "names"_a, "state"_a);
  m.def(
      "load_checkpoint",
      [](const std::string& path, Workspace& ws, const std::string& scope,
         const std::vector<std::string>& names) {
        return StateToDict(LoadCheckpoint(path, &ws, scope, names));
      },
      "path"_a, "workspace"_a, "scope"_a, "names"_a);
}

py::dict SummaryToDict(const OnnxExportSummary& s) {
  return py::dict("node_types"_a = s.node_types, "initializers"_a = s.initializers,
                  "parameter_values"_a = s.parameter_values, "file_bytes"_a = s.file_bytes,
                  "checker"_a = s.checker, "opset"_a = kOnnxOpsetVersion);
}

void BindOnnxExport(py::module_& m) {
  m.def(
      "export_onnx_checkpoint",
      [](const TrainerConfig& config, const std::set<std::string>& given, const std::string& path,
         bool softmax) {
        OnnxExportSummary summary;
        {
          py::gil_scoped_release release;
          summary = ExportCheckpointToOnnx(config, given, path, softmax);
        }
        return SummaryToDict(summary);
      },
      "config"_a, "given"_a, "path"_a, "softmax"_a);
  m.def(
      "export_onnx_net",
      [](const py::bytes& net_bytes, const Workspace& ws, const std::string& input, const Shape& input_shape,
         const std::string& output, const std::string& path, bool softmax, const std::string& input_name,
         const std::string& output_name, const std::map<std::string, std::string>& metadata) {
        OnnxGraphSpec spec;
        spec.input = input;
        spec.input_shape = input_shape;
        spec.output = output;
        spec.softmax = softmax;
        spec.input_name = input_name;
        spec.output_name = output_name;
        spec.metadata = metadata;
        const NetDef net = NetDefFromBytes(net_bytes);
        spec.graph_name = net.name().empty() ? "lockstep" : net.name();
        OnnxExportSummary summary;
        {
          py::gil_scoped_release release;
          summary = ExportOnnx(net, ws, spec, path);
        }
        return SummaryToDict(summary);
      },
      "net"_a, "workspace"_a, "input"_a, "input_shape"_a, "output"_a, "path"_a, "softmax"_a, "input_name"_a,
      "output_name"_a, "metadata"_a);
}

// The training stream of a CreateDB reader: its records per pass, and a resumed run's position in it.
void BindReaders(py::module_& m) {
  m.def("reader_records", [](const Workspace& ws, const std::string& reader) {
    return ws.GetObject<BatchReader>(reader)->records();
  });
  // A load checks its reader before it changes anything.
  m.def("require_reader", [](const Workspace& ws, const std::string& reader) {
    if (!ws.FindObject<BatchReader>(reader)) throw InvalidInput(NoReaderMessage(reader));
  });
  m.def("reader_seek", [](const Workspace& ws, const std::string& reader, int64_t position) {
    ws.GetObject<BatchReader>(reader)->Seek(position);
  });
}

void BindCsvLog(py::module_& m) {
  py::class_<EpochRecord>(m, "EpochRecord")
      .def(py::init<>())
      .def_readwrite("time_spent", &EpochRecord::time_spent)
      .def_readwrite("cumulative_time_spent", &EpochRecord::cumulative_time_spent)
      .def_readwrite("input_count", &EpochRecord::input_count)
      .def_readwrite("cumulative_input_count", &EpochRecord::cumulative_input_count)
      .def_readwrite("cumulative_batch_count", &EpochRecord::cumulative_batch_count)
      .def_readwrite("accuracy", &EpochRecord::accuracy)
      .def_readwrite("epoch", &EpochRecord::epoch)
      .def_readwrite("learning_rate", &EpochRecord::learning_rate)
      .def_readwrite("loss", &EpochRecord::loss)
      .def_readwrite("test_accuracy", &EpochRecord::test_accuracy);
  py::class_<CsvLog>(m, "CsvLog")
      .def(py::init<const std::string&, const std::string&, const std::string&>(), "directory"_a,
           "file_name"_a, "arguments"_a)
      .def_static("file_name", &CsvLog::FileName)
      .def("append", &CsvLog::Append)
      .def_property_readonly("path", &CsvLog::path);
}

void BindTensorBoard(py::module_& m) {
  py::class_<EventFile>(m, "EventFile")
      .def(py::init<const std::string&>(), "directory"_a)
      .def("scalar", &EventFile::Scalar, "tag"_a, "step"_a, "value"_a)
      .def("text", &EventFile::Text, "tag"_a, "step"_a, "markdown"_a)
      .def_property_readonly("path", &EventFile::path);
  m.def("open_training_events", &OpenTrainingEvents, "config"_a);
  m.def("write_epoch_events", &WriteEpochEvents, "events"_a, "record"_a, "step"_a);
}

}  // namespace

void BindTraining(py::module_& m) {
  BindOptions(m);
  BindShards(m);
  BindCheckpoints(m);
  BindOnnxExport(m);
  BindReaders(m);
  BindCsvLog(m);
  BindTensorBoard(m);
}

}  // namespace lockstep::python
