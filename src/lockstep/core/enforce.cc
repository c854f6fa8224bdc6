// Formats an enforce failure as "file:line: condition failed: detail".
#include "lockstep/core/enforce.h"

#include <cerrno>
#include <cstring>

namespace lockstep {

void ThrowEnforce(const char* file, int line, const std::string& condition, const std::string& message) {
  std::string path = file;
  auto pos = path.find("src/lockstep/");
  if (pos != std::string::npos) path = path.substr(pos + 4);
  throw Error(fmt::format("{}:{}: enforce failed: {}{}{}", path, line, condition, message.empty() ? "" : ": ",
                          message));
}

void ThrowErrno(const std::string& what) {
  const int error = errno;
  const std::string message = fmt::format("{}: {}", what, std::strerror(error));
  if (error == ENOSPC || error == EDQUOT) throw NoSpace(message + "; free space there and resume");
  throw IoError(message);
}

}  // namespace lockstep
