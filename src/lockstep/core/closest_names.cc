// Edit distance with adjacent transpositions (optimal string alignment): "alpah" is one edit from "alpha".
#include "lockstep/core/closest_names.h"

#include <algorithm>
#include <utility>

namespace lockstep {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  // d[i][j]: edits that turn a's first i characters into b's first j.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> ClosestNames(const std::string& name, const std::vector<std::string>& candidates) {
  // One edit for names up to 5 characters, two up to 9, and so on: short names are near everything.
  const size_t allowed = std::max<size_t>(1, (name.size() + 2) / 4);
  std::vector<std::pair<size_t, size_t>> near;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const size_t distance = EditDistance(name, candidates[i]);
    if (distance <= allowed) near.emplace_back(distance, i);
  }
  std::stable_sort(near.begin(), near.end());
  std::vector<std::string> names;
  for (const auto& entry : near) names.push_back(candidates[entry.second]);
  return names;
}

}  // namespace lockstep
