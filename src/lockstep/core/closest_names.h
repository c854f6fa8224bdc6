// Suggestions for a misspelled name (an operator argument, an operator type): the known names nearest to it.
#pragma once

#include <string>
#include <vector>

namespace lockstep {

// The candidates within a few edits of `name` (insertions, deletions, substitutions and swaps of adjacent
// characters; more for longer names), nearest first, ties in the candidates' order.
std::vector<std::string> ClosestNames(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace lockstep
