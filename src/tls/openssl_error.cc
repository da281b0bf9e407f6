#include "tls/openssl_error.h"

#include <cstring>

#include <openssl/err.h>

namespace kc::tls {

std::string TakeOpenSslError() {
  const unsigned long code = ::ERR_get_error();
  ::ERR_clear_error();
  if (code == 0) return "unknown error";
  const char* reason = ERR_SYSTEM_ERROR(code)  // a failed system call: its errno
                           ? std::strerror(ERR_GET_REASON(code))
                           : ::ERR_reason_error_string(code);
  const char* library = ::ERR_lib_error_string(code);
  std::string text = reason != nullptr ? reason : "error code " + std::to_string(code);
  if (library != nullptr) text += std::string(" (") + library + ")";
  return text;
}

}  // namespace kc::tls
