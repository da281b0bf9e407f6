// Test-only: self-signed certificates and their keys (P-256), made with
// OpenSSL's API and written as PEM files, so the tests need no openssl
// command and no files in the tree.
#pragma once

#include <stdio.h>

#include <filesystem>
#include <memory>
#include <string>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls/identity.h"

namespace kc::testing {

// `passphrase` non-empty: the key file is encrypted with it (AES-256-CBC).
inline tls::TlsIdentity WriteSelfSigned(const std::filesystem::path& dir, const std::string& name,
                                        const std::string& passphrase = "") {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  X509_sign(cert.get(), key.get(), EVP_sha256());

  tls::TlsIdentity files{(dir / (name + ".crt")).string(), (dir / (name + ".key")).string()};
  FILE* out = fopen(files.cert_file.c_str(), "w");
  PEM_write_X509(out, cert.get());
  fclose(out);
  out = fopen(files.key_file.c_str(), "w");
  if (passphrase.empty()) {
    PEM_write_PrivateKey(out, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_PrivateKey(out, key.get(), EVP_aes_256_cbc(),
                         reinterpret_cast<const unsigned char*>(passphrase.data()),
                         static_cast<int>(passphrase.size()), nullptr, nullptr);
  }
  fclose(out);
  return files;
}

}  // namespace kc::testing
