// Formats an enforce failure as "file:line: condition failed: detail".
#include "lockstep/core/enforce.h"

namespace lockstep {

void ThrowEnforce(const char* file, int line, const std::string& condition, const std::string& message) {
  std::string path = file;
  auto pos = path.find("src/lockstep/");
  if (pos != std::string::npos) path = path.substr(pos + 4);
  throw Error(fmt::format("{}:{}: enforce failed: {}{}{}", path, line, condition, message.empty() ? "" : ": ",
                          message));
}

}  // namespace lockstep
