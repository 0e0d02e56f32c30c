// SPDX-License-Identifier: MIT
// Reporting what goes wrong on the I/O thread with no caller to tell: `config::on_error`.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

#include "redlease/config.hpp"

namespace redlease::detail {

/// Calls `cfg.on_error` (default: a line on stderr). Never throws.
void report_background(const config& cfg, std::string_view source, std::error_code code, std::string message) noexcept;
/// Inside a catch block: reports the exception being handled. Never throws.
void report_exception(const config& cfg, std::string_view source) noexcept;

}  // namespace redlease::detail
