// SharedBytes: read-only bytes and whatever keeps them alive (a string, or a
// mapping of a sealed memfd), shared by the result and the reply that views
// them, so a large result is never copied on its way to the socket.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc {

class SharedBytes {
 public:
  SharedBytes() = default;
  static SharedBytes Of(std::string bytes);
  // Maps `fd` read-only. It must be a memfd sealed against writes, growth and
  // shrinking, so that what is mapped can change no more (its writer may be
  // hostile); otherwise kInvalidArgument.
  static StatusOr<SharedBytes> MapSealedMemfd(int fd);

  std::string_view view() const { return view_; }
  size_t size() const { return view_.size(); }
  // Holds the bytes alive for as long as it is held.
  const std::shared_ptr<const void>& keeper() const { return keeper_; }

 private:
  std::shared_ptr<const void> keeper_;
  std::string_view view_;
};

}  // namespace kc
