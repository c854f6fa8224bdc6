// The `make-db` command line: writes an image database from a folder of images, an idx pair or CIFAR-10.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "lockstep/data/make_db.h"

namespace lockstep {

// What the flags hold before they become MakeDbOptions.
struct MakeDbFlags {
  MakeDbOptions options;
  std::string format = "datum";
  bool raw = false;
};

void AddMakeDbFlags(CLI::App* app, MakeDbFlags* flags);
// Writes the database, with a progress line on stderr when it is a terminal, then prints one summary line.
int RunMakeDb(const MakeDbFlags& flags);

}  // namespace lockstep
