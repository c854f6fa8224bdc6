// The accepted values of a data source's options, in one place for `lockstep train`'s flags and the CreateDB
// operator's arguments: both call CheckSourceOptions, so both accept and refuse the same values, with the
// same message.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "lockstep/data/open_batch_source.h"

namespace lockstep {

// The bounds of the numeric options, inclusive (the trainer's option table shows them in its help). They are
// generous: a value past them is a typo or a unit mistake rather than a setting. One label leaves nothing to
// learn.
inline constexpr int64_t kMaxChannels = 4096;
inline constexpr int64_t kMaxImageSize = 65536;  // also the bound of scale
inline constexpr int64_t kMinLabels = 2, kMaxLabels = int64_t{1} << 24;
inline constexpr int64_t kMaxDecodeThreads = 1024;
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 20;
inline constexpr int64_t kMaxPrefetch = 1024;

// Throws InvalidInput with one line when an option of `spec`, `batch_size` (the records a batch_size option
// reads per step) or `prefetch` (the batches a reader prepares ahead) is refused: a number out of its range,
// a db_type that DbTypes() does not list, an unknown record_format or color_order, or for fashion-mnist a
// geometry option in `given` (the options the user set, by name) that contradicts fashion-mnist's.
// `option_prefix` names the options in the message: "--" for flags ("--num_labels"), "argument " for an
// operator's arguments ("argument num_labels").
void CheckSourceOptions(const SourceSpec& spec, int64_t batch_size, int64_t prefetch,
                        const std::set<std::string>& given, const std::string& option_prefix);

}  // namespace lockstep
