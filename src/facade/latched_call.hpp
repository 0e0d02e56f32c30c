// SPDX-License-Identifier: MIT
// A script call made exactly once by its request latch (a key the script writes under the call's
// request id, lock/naming.hpp): sent again with the same arguments while its outcome is unknown or
// it never left, and the latch makes the server count it once. The semaphore's releases and added
// permits, the latch's count_down and try_set_count.
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include "base/command.hpp"
#include "base/script.hpp"
#include "redlease/detail/unique_function.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {

class client_impl;

/// Whether a latched call is sent again after `ec`: its reply was lost or late (it may have run),
/// or it could not be sent (the connection could not be made).
bool resend_latched(std::error_code ec) noexcept;

/// Sends `script` with `args` to the node of `key`, and again while `resend_latched` and the client
/// is open, `sendings` times in all at most; `done` gets the last answer. `once`, when given, runs
/// before `done` when the first sending was answered without an error: nothing else of the call is
/// on the way, so its latch will never be read (latch_sweeper). Executor only.
void send_latched(std::shared_ptr<client_impl> c, std::string key, const lua_script& script, arg_list args,
                  int sendings, unique_function<void(std::error_code, reply)> done,
                  unique_function<void()> once = {});

}  // namespace redlease::detail
