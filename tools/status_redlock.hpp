// SPDX-License-Identifier: MIT
// `redlease status --redlock` (cli_status_redlock.cpp).
#pragma once

#include <string>
#include <vector>

namespace redlease::cli {

/// Shows each lock of `names` on every master of `urls` (one --redis each; none: $REDLEASE_URL's
/// list) and whether a majority holds one value; a JSON object per lock with `json`. Returns the
/// exit status: 0; 65 when a key is not a string on some master; 69 when fewer than a majority of
/// the masters answered; 64 for fewer than 3 masters.
int status_redlock(const std::vector<std::string>& urls, const std::vector<std::string>& names, bool json);

}  // namespace redlease::cli
