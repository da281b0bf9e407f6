// UTF-8 checks shared by the JSON reader and writer (json_reader.h,
// json_writer.h) and the output capture's text (spec/protocol.md §4.5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kc::protocol {

// The UTF-8 sequence starting at text[pos] (pos < text.size()). A well-formed
// one is 1-4 bytes. An ill-formed one (a stray continuation byte, an overlong
// form, an encoded surrogate ED A0..BF, a code point above U+10FFFF, a cut-off
// sequence) is its maximal subpart: the bytes some well-formed sequence could
// have started with, at least one (Unicode §3.9, "U+FFFD substitution").
struct Utf8Sequence {
  size_t length = 0;
  bool valid = false;
};
Utf8Sequence ScanUtf8(std::string_view text, size_t pos);

// True if text[pos..pos+3) is a surrogate code point (U+D800..U+DFFF) in the
// 3-byte form WTF-8 gives it; sets *code_unit to it.
bool IsWtf8Surrogate(std::string_view text, size_t pos, uint16_t* code_unit);

// Appends `code_point` (at most U+10FFFF) in UTF-8; a surrogate code point
// gets its 3-byte WTF-8 form.
void AppendUtf8(std::string& out, uint32_t code_point);

// `bytes` decoded as UTF-8 with replacement: each maximal ill-formed subpart
// becomes U+FFFD, as Python's bytes.decode("utf-8", "replace") does.
std::string ToValidUtf8(std::string_view bytes);

}  // namespace kc::protocol
