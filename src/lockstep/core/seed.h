// The seed of parameters' initial values and of the training data's order unless one is given (the trainer's
// --seed, ModelHelper::set_seed, CreateDB's `seed`).
#pragma once

#include <cstdint>

namespace lockstep {

constexpr uint64_t kDefaultSeed = 1;

}  // namespace lockstep
