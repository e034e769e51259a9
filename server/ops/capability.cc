#include "server/ops/capability.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace clf::server {

std::string CapabilityMac(std::string_view key, Handle h, v1::CapOp op, uint64_t expires_ms) {
  unsigned char msg[20];
  const uint32_t o = static_cast<uint32_t>(op);
  for (int i = 0; i < 8; ++i) msg[i] = static_cast<unsigned char>(h >> (8 * i));
  for (int i = 0; i < 4; ++i) msg[8 + i] = static_cast<unsigned char>(o >> (8 * i));
  for (int i = 0; i < 8; ++i) msg[12 + i] = static_cast<unsigned char>(expires_ms >> (8 * i));
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg, sizeof msg, out, &len) ==
          nullptr ||
      len != kCapabilityMacBytes) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

Status CheckCapability(std::string_view key, const v1::Capability& cap, v1::CapOp op,
                       uint64_t now_ms) {
  if (key.empty()) return Status(Code::kPermission, "this server has no capability key");
  if (cap.op() != op) return Status(Code::kPermission, "capability is for another operation");
  if (cap.expires_ms() < now_ms) return Status(Code::kPermission, "capability expired");
  if (cap.mac().size() != kCapabilityMacBytes) {
    return Status(Code::kPermission, "capability signature has the wrong length");
  }
  const std::string want = CapabilityMac(key, cap.handle(), op, cap.expires_ms());
  if (want.size() != kCapabilityMacBytes ||
      CRYPTO_memcmp(want.data(), cap.mac().data(), kCapabilityMacBytes) != 0) {
    return Status(Code::kPermission, "capability signature does not match");
  }
  return Status::Ok();
}

}  // namespace clf::server
