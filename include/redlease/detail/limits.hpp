// SPDX-License-Identifier: MIT
// Limits shared by the configuration and the lock handles.
#pragma once

#include <chrono>

namespace redlease::detail {

/// The longest duration accepted for a lease or a wait (about 34 years): anything longer is
/// rejected as invalid rather than overflowing time arithmetic. A constant; thread-safe.
inline constexpr std::chrono::milliseconds max_duration{1LL << 40};

}  // namespace redlease::detail
