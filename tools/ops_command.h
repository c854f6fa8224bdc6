// The `ops` command line: the operator catalogue, printed from the operators' schemas.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lockstep {

struct OpsFlags {
  std::string type;  // empty: every type
};

void AddOpsFlags(CLI::App* app, OpsFlags* flags);
// Without a type, one line per operator type: its name and the first sentence of its doc. With one, its doc,
// inputs, outputs and arguments (name, type, default, accepted values, doc). An unknown type is an
// InvalidInput naming the closest types.
int RunOps(const OpsFlags& flags);

}  // namespace lockstep
