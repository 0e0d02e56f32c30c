// SPDX-License-Identifier: MIT
// Unit tests of the CLI's mapping of library errors to exit statuses (tools/common.cpp,
// exit_code_for), which also covers codes no CLI run produces (attempts_exhausted).
#include <gtest/gtest.h>

#include <system_error>

#include "commands.hpp"
#include "redlease/error.hpp"

namespace redlease::cli {
namespace {

// A backoff wait whose max_attempts ran out gave up waiting for a lock someone else holds: the
// "not acquired" status, as for a --wait that runs out, not 70 (an unexpected error).
TEST(cli_exit_code, attempts_exhausted_is_not_acquired) {
  EXPECT_EQ(exit_code_for(make_error_code(errc::attempts_exhausted)), exit_code::not_acquired);
  EXPECT_EQ(exit_code::not_acquired, 75);
}

// The rest of the table, so that a change to it is a deliberate one.
TEST(cli_exit_code, each_class_of_error_has_its_status) {
  EXPECT_EQ(exit_code_for(make_error_code(errc::wrong_type)), exit_code::data_error);
  EXPECT_EQ(exit_code_for(make_error_code(errc::invalid_argument)), exit_code::usage);
  EXPECT_EQ(exit_code_for(make_error_code(errc::invalid_url)), exit_code::usage);
  EXPECT_EQ(exit_code_for(make_error_code(errc::connect_failed)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::tls_handshake_failed)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::tls_bad_files)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::no_sentinel)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::no_permission)), exit_code::config_problem);
  EXPECT_EQ(exit_code_for(make_error_code(errc::unknown_command)), exit_code::config_problem);
  EXPECT_EQ(exit_code_for(make_error_code(errc::server_error)), exit_code::software);
  EXPECT_EQ(exit_code_for(make_error_code(errc::bad_reply)), exit_code::software);
}

}  // namespace
}  // namespace redlease::cli
