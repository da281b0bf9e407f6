#include "tls/openssl_error.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>

namespace kc::tls {
namespace {

TEST(TakeOpenSslError, NamesTheCauseAndEmptiesTheQueue) {
  static const char kGarbage[] = "not a certificate";
  BIO* bio = BIO_new_mem_buf(kGarbage, sizeof(kGarbage) - 1);
  EXPECT_EQ(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr), nullptr);
  BIO_free(bio);
  EXPECT_EQ(TakeOpenSslError(), "no start line (PEM routines)");
  EXPECT_EQ(TakeOpenSslError(), "unknown error");  // nothing left over for the next failure
}

}  // namespace
}  // namespace kc::tls
