// TakeOpenSslError: why OpenSSL's last call on this thread failed, as text,
// with the thread's error queue emptied, so a later failure is not blamed on
// this one's leftovers.
#pragma once

#include <string>

namespace kc::tls {

// The earliest error in the queue, which names the cause ("no start line
// (PEM routines)", "No such file or directory (system library)"); the later
// ones only say which call gave up. "unknown error" when the queue is empty.
std::string TakeOpenSslError();

}  // namespace kc::tls
