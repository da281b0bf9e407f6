#include "worker/network_namespaces.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/memfd.h"

namespace kc::worker {

namespace {

constexpr size_t kMaxIdle = 64;

// Every trace a worker can leave in a namespace without privileges: its
// sockets of each family, TIME_WAIT and orphans (sockstat), and the counters
// any traffic moves.
constexpr const char* kNetFiles[] = {"sockstat", "sockstat6", "unix",  "packet", "netlink",
                                     "dev",      "snmp",      "snmp6", "netstat"};

Status Failed(const std::string& step) {
  return FailedPreconditionError("network namespace: " + step + ": " + std::strerror(errno));
}

std::string CurrentFingerprint() {
  std::string all;
  for (const char* name : kNetFiles) {
    UniqueFd file(
        ::open((std::string("/proc/thread-self/net/") + name).c_str(), O_RDONLY | O_CLOEXEC));
    auto text = file.valid() ? ReadWholeFd(file.get()) : StatusOr<std::string>(std::string());
    all += name;
    all += '\n';
    if (text.ok()) all += *text;
  }
  return all;
}

}  // namespace

Status BringUpLoopback() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Failed("socket");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) return Failed("read lo flags");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) return Failed("bring lo up");
  return Status::Ok();
}

StatusOr<NetworkNamespaces::Namespace> NetworkNamespaces::Create() {
  if (!own_.valid()) {
    own_.Reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!own_.valid()) return Failed("open our own");
  }
  if (::unshare(CLONE_NEWNET) != 0) return Failed("unshare");
  Namespace created;
  Status status = BringUpLoopback();
  if (status.ok()) {
    created.fd.Reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!created.fd.valid()) status = Failed("open the new one");
    created.fingerprint = CurrentFingerprint();
  }
  if (::setns(own_.get(), CLONE_NEWNET) != 0) return Failed("return to our own");
  KC_RETURN_IF_ERROR(status);
  return created;
}

StatusOr<std::string> NetworkNamespaces::FingerprintOf(int fd) {
  if (::setns(fd, CLONE_NEWNET) != 0) return Failed("enter to inspect");
  std::string fingerprint = CurrentFingerprint();
  if (::setns(own_.get(), CLONE_NEWNET) != 0) return Failed("return to our own");
  return fingerprint;
}

StatusOr<int> NetworkNamespaces::Acquire() {
  if (idle_.empty()) {
    KC_ASSIGN_OR_RETURN(Namespace created, Create());
    idle_.push_back(std::move(created));
  }
  lent_.push_back(std::move(idle_.back()));
  idle_.pop_back();
  return lent_.back().fd.get();
}

void NetworkNamespaces::Release(int fd) {
  auto it = std::find_if(lent_.begin(), lent_.end(),
                         [fd](const Namespace& n) { return n.fd.get() == fd; });
  if (it == lent_.end()) return;
  Namespace returned = std::move(*it);
  lent_.erase(it);
  auto now = FingerprintOf(returned.fd.get());
  if (now.ok() && *now == returned.fingerprint && idle_.size() < kMaxIdle)
    idle_.push_back(std::move(returned));
  // else: closed here; the kernel destroys the namespace
}

}  // namespace kc::worker
