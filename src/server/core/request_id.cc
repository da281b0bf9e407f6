#include "server/core/request_id.h"

#include <random>

namespace kc::server {

bool IsCanonicalUuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::string NewUuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  unsigned char bytes[16];
  for (int i = 0; i < 16; i += 8) {
    uint64_t r = rng();
    for (int j = 0; j < 8; ++j)
      bytes[i + j] = static_cast<unsigned char>(r >> (8 * j));
  }
  bytes[6] = (bytes[6] & 0x0f) | 0x40;  // version 4
  bytes[8] = (bytes[8] & 0x3f) | 0x80;  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

std::string ChooseRequestId(const std::vector<std::string_view>& supplied) {
  if (supplied.size() == 1 && IsCanonicalUuid(supplied[0])) return std::string(supplied[0]);
  return NewUuid();
}

}  // namespace kc::server
