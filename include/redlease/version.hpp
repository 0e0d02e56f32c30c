// SPDX-License-Identifier: MIT
/// @file
/// The library version.
#pragma once

namespace redlease {
/// The version of redlease, "major.minor.patch".
inline constexpr const char* version = "0.1.0";
}  // namespace redlease
