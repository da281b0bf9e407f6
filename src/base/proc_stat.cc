#include "base/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "base/unique_fd.h"

namespace kc {

std::optional<int> ParseProcId(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

StatusOr<ProcStat> ParseProcStat(std::string_view text) {
  size_t open = text.find(" (");
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open + 2 ||
      close + 4 > text.size() || text[close + 1] != ' ' || text[close + 3] != ' ') {
    return InvalidArgumentError("malformed /proc/<pid>/stat line");
  }
  std::optional<int> pid = ParseProcId(text.substr(0, open));
  std::string_view rest = text.substr(close + 4);
  std::optional<int> ppid = ParseProcId(rest.substr(0, rest.find(' ')));
  if (!pid || *pid == 0 || !ppid) return InvalidArgumentError("malformed /proc/<pid>/stat ids");
  ProcStat stat;
  stat.pid = *pid;
  stat.comm = std::string(text.substr(open + 2, close - open - 2));
  stat.state = text[close + 2];
  stat.ppid = *ppid;
  return stat;
}

StatusOr<ProcStat> ReadProcStat(const std::string& proc_dir) {
  UniqueFd fd(open((proc_dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  char buffer[4096];  // a stat line is far shorter
  ssize_t n = -1;
  if (fd.valid()) {
    do {
      n = read(fd.get(), buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
  }
  if (n < 0) return NotFoundError("cannot read " + proc_dir + "/stat");
  return ParseProcStat(std::string_view(buffer, static_cast<size_t>(n)));
}

}  // namespace kc
