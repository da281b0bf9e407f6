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

  EncodedMultipart encoded;
  encoded.content_type = "multipart/form-data; boundary=" + boundary;
  size_t size = boundary.size() + 8;
  for (const OutgoingPart& part : parts)
    size += boundary.size() + part.name.size() + part.content_type.size() + 80;
  std::string& framing = encoded.framing;
  framing.reserve(size);                         // never reallocated below, so views into it hold
  std::vector<std::pair<size_t, size_t>> texts;  // (offset, size) in framing
  auto text = [&](const auto&... pieces) {
    const size_t start = framing.size();
    (framing.append(pieces), ...);
    texts.emplace_back(start, framing.size() - start);
  };
  for (size_t k = 0; k < parts.size(); ++k) {
    const OutgoingPart& part = parts[k];
    text(k == 0 ? "--" : "\r\n--", boundary, "\r\nContent-Disposition: form-data; name=\"",
         part.name, "\"\r\nContent-Type: ", part.content_type, "\r\n\r\n");
  }
  text(parts.empty() ? "--" : "\r\n--", boundary, "--\r\n");
  for (size_t k = 0; k < texts.size(); ++k) {
    encoded.pieces.emplace_back(framing.data() + texts[k].first, texts[k].second);
    if (k < parts.size() && !parts[k].body.empty()) encoded.pieces.push_back(parts[k].body);
  }
  return encoded;
}

size_t EncodedMultipart::size() const {
  size_t total = 0;
  for (std::string_view piece : pieces)
    total += piece.size();
  return total;
}

std::string EncodedMultipart::Join() const {
  std::string body;
  body.reserve(size());
  for (std::string_view piece : pieces)
    body += piece;
  return body;
}

}  // namespace kc::protocol
