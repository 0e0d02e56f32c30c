// SPDX-License-Identifier: MIT
/// @file
/// redlease: distributed locks on Redis for C++20.
///
/// **Example**:
/// @code
/// redlease::client c{redlease::config::from_url("redis://127.0.0.1:6379")};
/// redlease::lock l = c.lock("orders:42");
/// std::lock_guard g(l);   // waits (pub/sub, no polling); the watchdog renews until unlock
/// @endcode
#pragma once

#include "redlease/client.hpp"
#include "redlease/client_card.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"
#include "redlease/latch.hpp"
#include "redlease/permit_semaphore.hpp"
#include "redlease/layout.hpp"
#include "redlease/lock.hpp"
#include "redlease/multi_lock.hpp"
#include "redlease/redlock.hpp"
#include "redlease/reply.hpp"
#include "redlease/semaphore.hpp"
#include "redlease/stock.hpp"
#include "redlease/version.hpp"
