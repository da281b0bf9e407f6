#include "base/background_close.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace kc {

namespace {

class Closer {
 public:
  Closer() {
    std::thread([this] { Run(); }).detach();
  }

  void Add(int fd) {
    {
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
    }
    ready_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      int fd = -1;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return !fds_.empty(); });
        fd = fds_.front();
        fds_.pop_front();
      }
      ::close(fd);
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<int> fds_;  // mu_
};

}  // namespace

void CloseInBackground(UniqueFd fd) {
  if (!fd.valid()) return;
  // Never destroyed: its thread waits on it until the process exits, which closes what is left.
  static Closer* const closer = new Closer();
  closer->Add(fd.Release());
}

}  // namespace kc
