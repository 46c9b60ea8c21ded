/// \file
/// Stable (platform- and run-independent) hashing for structural hashes and keys.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tensortune {

/// Mixes `value` into `seed`; order-sensitive, stable across runs and processes.
inline uint64_t hash_combine(uint64_t seed, uint64_t value) {
  // splitmix64 finaliser over the xor: good avalanche, no per-process salt.
  uint64_t z = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// FNV-1a of a byte string; stable across runs and processes.
inline uint64_t hash_string(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// The bits of a double, with +0/-0 and all NaNs folded so equal values hash equal.
inline uint64_t hash_double(double value) {
  if (value == 0) value = 0;
  if (value != value) return 0x7ff8000000000000ULL;
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// The SHA-256 digest of `bytes` as 64 lowercase hex digits (OpenSSL's):
/// the content hash of files read back from disk, which must tell any change.
std::string sha256_hex(std::string_view bytes);

}  // namespace tensortune
