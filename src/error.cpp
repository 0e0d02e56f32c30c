// SPDX-License-Identifier: MIT
#include "redlease/error.hpp"

namespace redlease {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redlease"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::connect_failed: return "could not connect to the Redis server";
      case errc::connect_timeout: return "timed out connecting to the Redis server";
      case errc::connection_lost: return "connection to the Redis server lost with the request in flight";
      case errc::request_timeout: return "the Redis server did not answer in time";
      case errc::auth_failed: return "authentication failed";
      case errc::select_failed: return "SELECT of the configured database failed";
      case errc::protocol_error: return "unexpected reply from the Redis server";
      case errc::server_error: return "the Redis server returned an error";
      case errc::wrong_type: return "the key holds a value of the wrong type";
      case errc::invalid_url: return "invalid Redis URL";
      case errc::tls_not_supported: return "rediss:// (TLS) is not supported yet";
      case errc::invalid_argument: return "invalid argument";
      case errc::client_closed: return "the client is closed";
      case errc::operation_aborted: return "operation aborted";
      case errc::not_owner: return "the lock is not held by this owner";
      case errc::lock_lost: return "the lock was lost (expired, deleted or taken by another owner)";
      case errc::would_deadlock: return "the operation would deadlock";
      case errc::server_busy: return "the Redis server is busy, loading or out of memory";
      case errc::server_readonly: return "the Redis server is a read-only replica";
    }
    return "unknown redlease error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

void throw_if(const std::error_code& ec, const char* what) {
  if (ec) throw error(ec, what);
}

}  // namespace redlease
