// SHA-256 digests in OCI form ("sha256:<64 hex>"), via OpenSSL's EVP interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kiln::oci {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const uint8_t> bytes);
  std::string hex();     // finishes the hash; call once
  std::string digest();  // "sha256:" + hex()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_digest(std::string_view bytes);

// The hex part of "sha256:<hex>" (the blob's file name under blobs/sha256/).
std::string_view digest_hex(std::string_view digest);

}  // namespace kiln::oci
