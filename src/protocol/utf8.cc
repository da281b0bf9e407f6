#include "protocol/utf8.h"

namespace kc::protocol {

namespace {

bool IsContinuation(unsigned char byte) {
  return (byte & 0xC0) == 0x80;
}

// How many bytes at `pos` form a prefix that some well-formed sequence could
// continue (Unicode 15 §3.9, table 3-7), and how long the whole sequence must
// be. A lead byte that starts nothing gives {0, 0}.
struct Prefix {
  size_t valid = 0;
  size_t needed = 0;
};

Prefix ScanPrefix(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {1, 1};
  size_t needed = 0;
  unsigned char low = 0x80, high = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return {0, 0};
  }
  size_t valid = 1;
  if (pos + 1 < text.size() && byte(1) >= low && byte(1) <= high) {
    valid = 2;
    while (valid < needed && pos + valid < text.size() && IsContinuation(byte(valid))) {
      ++valid;
    }
  }
  return {valid, needed};
}

}  // namespace

Utf8Sequence ScanUtf8(std::string_view text, size_t pos) {
  Prefix prefix = ScanPrefix(text, pos);
  if (prefix.needed != 0 && prefix.valid == prefix.needed) return {prefix.valid, true};
  return {prefix.valid == 0 ? 1 : prefix.valid, false};
}

bool IsWtf8Surrogate(std::string_view text, size_t pos, uint16_t* code_unit) {
  if (pos + 3 > text.size()) return false;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  if (byte(0) != 0xED || byte(1) < 0xA0 || byte(1) > 0xBF || !IsContinuation(byte(2))) {
    return false;
  }
  *code_unit = static_cast<uint16_t>(0xD000 | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F));
  return true;
}

void AppendUtf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      out += bytes[pos++];
      continue;
    }
    Utf8Sequence sequence = ScanUtf8(bytes, pos);
    if (sequence.valid) {
      out.append(bytes.substr(pos, sequence.length));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    pos += sequence.length;
  }
  return out;
}

}  // namespace kc::protocol
