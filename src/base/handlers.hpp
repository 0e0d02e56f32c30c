// SPDX-License-Identifier: MIT
// The completion types every layer shares: the clock time decisions use, and a request's handler.
#pragma once

#include <chrono>
#include <system_error>

#include "redlease/detail/unique_function.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {

using clock = std::chrono::steady_clock;
/// Completes a request with (ec, reply): a server error reply arrives as a reply of type error
/// (mapped to its code where the layer says so).
using reply_handler = unique_function<void(std::error_code, reply)>;

}  // namespace redlease::detail
