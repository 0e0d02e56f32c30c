// SPDX-License-Identifier: MIT
// Random identifiers from the CSPRNG (OpenSSL's RAND_bytes).
#pragma once

#include <string>

namespace redlease::detail {

/// 128 random bits as 32 lowercase hex digits: a mutex token.
std::string random_token();

/// A number in [0, 1) from the CSPRNG (52 random bits): the random part of a retry delay.
double random_unit();
/// A random (version 4) UUID: a client's id in Redisson owner fields.
std::string random_uuid();

}  // namespace redlease::detail
