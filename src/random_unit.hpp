// SPDX-License-Identifier: MIT
// random_unit(), defined in random.cpp. Its own header for now: src/multi/redlock.cpp includes
// random.hpp and still has a private function of the same name (to be switched to this one), so
// declaring it in random.hpp would make that file's calls ambiguous.
#pragma once

namespace redlease::detail {

/// A number in [0, 1) from the CSPRNG (52 random bits): the random part of a retry delay.
double random_unit();

}  // namespace redlease::detail
