#include "containers/oci/digest.h"

#include <new>

#include <openssl/evp.h>

namespace kiln::oci {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  // Only allocation failure can make these fail; there is no meaningful recovery.
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(std::span<const uint8_t> bytes) {
  if (!bytes.empty()) EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string Sha256::digest() { return "sha256:" + hex(); }

std::string sha256_digest(std::string_view bytes) {
  Sha256 h;
  h.update({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  return h.digest();
}

std::string_view digest_hex(std::string_view digest) {
  const auto colon = digest.find(':');
  return colon == std::string_view::npos ? digest : digest.substr(colon + 1);
}

}  // namespace kiln::oci
