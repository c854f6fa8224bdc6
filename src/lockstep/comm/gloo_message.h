// Gloo prefixes its error messages with "[file:line] " (sometimes twice); users need only the rest.
#pragma once

#include <string>

namespace lockstep {

inline std::string GlooMessage(const std::string& message) {
  size_t start = 0;
  while (start < message.size() && message[start] == '[') {
    size_t end = message.find("] ", start);
    if (end == std::string::npos || message.find(':', start) > end) break;
    start = end + 2;
  }
  return message.substr(start);
}

}  // namespace lockstep
