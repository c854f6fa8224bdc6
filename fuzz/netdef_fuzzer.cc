// Fuzzes NetDef loading: binary or text-format parsing (the first byte picks), then the checks a loaded net
// meets before it runs: every operator against its schema, and shape inference from 4-d float inputs.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"

// Text-format errors are logged by protobuf before ParseNetDef throws; a line per input would drown the
// fuzzer's output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  bool text = data[0] & 1;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    lockstep::NetDef net = lockstep::ParseNetDef(bytes, text, "fuzz");
    for (const auto& op : net.op()) {
      const lockstep::OpSchema* schema = lockstep::SchemaRegistry::Find(op.type());
      if (!schema) return 0;
      schema->Verify(op);
    }
    std::map<std::string, lockstep::TensorShape> shapes;
    for (const auto& name : net.external_input()) shapes[name] = {{2, 3, 8, 8}, lockstep::DataType::kFloat};
    lockstep::InferNetShapes(net, shapes);
  } catch (const lockstep::Error&) {  // InvalidInput, or an enforce in a shape function
  }
  return 0;
}
