// HMAC-SHA256 (RFC 2104 over SHA-256, OpenSSL), the seal on benchmark records: the worker
// signs each record with its per-process key and the server checks it with the same key
// (docs/benchmark-integrity.md "Sealed results").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kc {

inline constexpr size_t kHmacSha256Bytes = 32;

// The 32-byte MAC of `message` under `key` (any length).
std::string HmacSha256(std::string_view key, std::string_view message);

// The MAC as 64 lowercase hex characters.
std::string HmacSha256Hex(std::string_view key, std::string_view message);

// True when `a` and `b` are equal, in time that depends only on their lengths (a seal
// compared with memcmp would tell an attacker how many leading characters are right).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Lowercase hex of `bytes`.
std::string HexEncode(std::string_view bytes);

// The bytes of an even-length hex string (either case); nullopt for anything else.
std::optional<std::string> HexDecode(std::string_view hex);

}  // namespace kc
