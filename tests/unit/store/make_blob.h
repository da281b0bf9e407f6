// MakeBlob: a Blob holding `bytes`, with its real hash. Test-only.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "store/blob.h"

namespace kc::store::testing {

inline BlobPtr MakeBlob(const std::string& bytes) {
  StatusOr<BlobPtr> blob = Blob::FromBytes(Sha256Hex(bytes), bytes);
  EXPECT_TRUE(blob.ok()) << blob.status().message();
  return blob.ok() ? *blob : nullptr;
}

}  // namespace kc::store::testing
