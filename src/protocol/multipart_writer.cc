#include "protocol/multipart_writer.h"

#include <cstdint>
#include <random>
#include <string>

namespace kc::protocol {
namespace {

constexpr std::string_view kBoundaryPrefix = "kcoral-";
constexpr int kBoundaryHexDigits = 32;

std::string RandomBoundary() {
  // Not a secret, only unlikely to collide; one engine per thread keeps this lock-free.
  thread_local std::mt19937_64 engine{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string boundary(kBoundaryPrefix);
  for (int i = 0; i < kBoundaryHexDigits; i += 16) {
    uint64_t bits = engine();
    for (int j = 0; j < 16; ++j, bits >>= 4)
      boundary += kHex[bits & 0xf];
  }
  return boundary;
}

bool OccursInAnyBody(const std::vector<OutgoingPart>& parts, const std::string& boundary) {
  for (const OutgoingPart& part : parts) {
    if (part.body.find(boundary) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

EncodedMultipart WriteMultipart(const std::vector<OutgoingPart>& parts) {
  std::string boundary;
  do {
    boundary = RandomBoundary();
  } while (OccursInAnyBody(parts, boundary));

  size_t size = boundary.size() + 6;
  for (const OutgoingPart& part : parts) {
    size += boundary.size() + part.name.size() + part.content_type.size() + part.body.size() + 80;
  }
  EncodedMultipart encoded;
  encoded.content_type = "multipart/form-data; boundary=" + boundary;
  std::string& body = encoded.body;
  body.reserve(size);
  for (const OutgoingPart& part : parts) {
    body += "--";
    body += boundary;
    body += "\r\nContent-Disposition: form-data; name=\"";
    body += part.name;
    body += "\"\r\nContent-Type: ";
    body += part.content_type;
    body += "\r\n\r\n";
    body += part.body;
    body += "\r\n";
  }
  body += "--";
  body += boundary;
  body += "--\r\n";
  return encoded;
}

}  // namespace kc::protocol
