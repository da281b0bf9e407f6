// kcoral-server: the KCoral HTTP server. Usually started through the Python
// CLI (`kcoral server ...`), which passes the interpreter that runs workers.
#include <malloc.h>

#include <cstdlib>
#include <iostream>

#include "server/root/app.h"
#include "server/root/server_flags.h"

int main(int argc, char** argv) {
  // Large buffers (request bodies, outcomes, responses of many MB) come from
  // their own mappings and go back to the kernel when freed. Left to adapt,
  // glibc raises the threshold after the first such free and then keeps the
  // peaks in its arenas: the fault soak ended at 247 MiB RSS instead of 45.
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  kc::server::ParsedFlags flags =
      kc::server::ParseServerFlags(argc, argv, std::getenv, std::cout, std::cerr);
  if (!flags.config) return flags.exit_code;
  kc::server::App app(*flags.config);
  return app.Run();
}
