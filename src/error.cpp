// SPDX-License-Identifier: MIT
#include "redlease/error.hpp"

#include <asio/error.hpp>

#include <cstdio>
#include <exception>

#include "background.hpp"
#include "redlease/config.hpp"

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
      case errc::protocol_error: return "the peer does not speak the Redis protocol (or broke it)";
      case errc::server_error: return "the Redis server returned an error";
      case errc::wrong_type: return "the key holds a value of the wrong type";
      case errc::invalid_url: return "invalid Redis URL";
      case errc::tls_not_supported: return "TLS is not supported on a unix socket";
      case errc::invalid_argument: return "invalid argument";
      case errc::client_closed: return "the client is closed";
      case errc::operation_aborted: return "operation aborted";
      case errc::not_owner: return "the lock is not held by this owner";
      case errc::lock_lost: return "the lock was lost (expired, deleted or taken by another owner)";
      case errc::would_deadlock: return "the operation would deadlock";
      case errc::server_busy: return "the Redis server is busy";
      case errc::server_readonly: return "the Redis server is a read-only replica";
      case errc::bad_reply: return "the Redis server's reply is not what the operation expects";
      case errc::no_permission: return "the Redis ACL user lacks a permission redlease needs (see docs/deployment.md)";
      case errc::unknown_command: return "the Redis server does not know a command redlease needs (renamed or disabled)";
      case errc::server_oom:
        return "the Redis server is out of memory: maxmemory reached with nothing to evict (maxmemory-policy "
               "noeviction, or no key its policy may evict)";
      case errc::no_replicas: return "the Redis server has fewer replicas than min-replicas-to-write";
      case errc::server_full: return "the Redis server refused the connection: maxclients reached";
      case errc::server_loading: return "the Redis server is loading its dataset";
      case errc::tls_handshake_failed: return "the TLS handshake with the Redis server failed";
      case errc::tls_untrusted_certificate:
        return "TLS: the server's certificate is signed by an unknown CA; set config::tls.ca_file";
      case errc::tls_name_mismatch:
        return "TLS: the server's certificate does not name the host connected to; connect by a name it "
               "lists or set config::tls.verify_name";
      case errc::tls_certificate_expired:
        return "TLS: the server's certificate has expired (or is not yet valid); renew it on the server";
      case errc::tls_client_certificate_required:
        return "TLS: the server requires a client certificate; set config::tls.cert_file and key_file";
      case errc::tls_expected_by_server:
        return "the server closed the connection during the handshake: is this a TLS port? use rediss://";
      case errc::tls_not_offered_by_server:
        return "TLS: the server does not speak TLS on this port; use redis://";
      case errc::tls_bad_files: return "TLS: a CA, certificate or key file of config::tls could not be loaded";
      case errc::not_replicated: return "fewer replicas than config::replica_ack acknowledged the write in time";
      case errc::no_sentinel: return "no Sentinel answered with the master's address";
      case errc::master_switched: return "the master changed (failover) and the key had not reached the new master";
      case errc::attempts_exhausted:
        return "the lock stayed held by another owner through every attempt the wait strategy allows (max_attempts)";
      case errc::max_hold_exceeded:
        return "the hold reached config::max_hold: the watchdog stopped renewing it";
    }
    return "unknown redlease error";
  }
  // A code with an errno counterpart also matches that condition in Asio's own system category,
  // where Asio's error codes live (asio::error::operation_aborted is asio.system:ECANCELED), so
  // `ec == asio_ec.default_error_condition()` holds as it does for std::errc.
  bool equivalent(int ev, const std::error_condition& cond) const noexcept override {
    auto mine = default_error_condition(ev);
    if (mine == cond) return true;
    return mine.category() == std::generic_category() && cond.category() == asio::system_category() &&
           cond.value() == mine.value();
  }
  std::error_condition default_error_condition(int ev) const noexcept override {
    switch (static_cast<errc>(ev)) {
      case errc::connect_timeout:
      case errc::request_timeout: return std::errc::timed_out;
      case errc::operation_aborted: return std::errc::operation_canceled;
      case errc::invalid_argument: return std::errc::invalid_argument;
      case errc::would_deadlock: return std::errc::resource_deadlock_would_occur;
      case errc::connect_failed: return std::errc::connection_refused;
      case errc::connection_lost: return std::errc::connection_reset;
      case errc::not_owner: return std::errc::operation_not_permitted;
      case errc::server_busy:
      case errc::server_loading: return std::errc::device_or_resource_busy;
      case errc::no_permission: return std::errc::permission_denied;
      case errc::unknown_command: return std::errc::function_not_supported;
      case errc::server_oom: return std::errc::not_enough_memory;
      case errc::protocol_error: return std::errc::protocol_error;
      case errc::bad_reply: return std::errc::bad_message;
      case errc::tls_not_supported: return std::errc::protocol_not_supported;
      case errc::tls_client_certificate_required: return std::errc::permission_denied;
      case errc::tls_expected_by_server: return std::errc::connection_reset;
      case errc::tls_not_offered_by_server: return std::errc::protocol_error;
      case errc::attempts_exhausted: return std::errc::resource_unavailable_try_again;
      default: return {ev, *this};
    }
  }
};

// The codes whose error text (tls.cpp) is a whole sentence: what failed, why, and what to set.
bool is_tls_failure(const std::error_code& ec) noexcept {
  return ec.category() == error_category() && ec.value() >= static_cast<int>(errc::tls_handshake_failed) &&
         ec.value() <= static_cast<int>(errc::tls_bad_files);
}

}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

namespace detail {

void report_background(const config& cfg, std::string_view source, std::error_code code,
                       std::string message) noexcept {
  try {
    background_error e{source, code, std::move(message)};
    if (cfg.on_error) {
      cfg.on_error(e);
      return;
    }
    std::string line = "redlease: " + std::string(source) + ": " + e.message;
    if (code && e.message.empty()) line += code.message();
    line.push_back('\n');
    std::fputs(line.c_str(), stderr);
  } catch (...) {
    // The hook threw, or there was no memory for the line: nothing more can be done about it here.
  }
}

void report_exception(const config& cfg, std::string_view source) noexcept {
  std::string what = "an exception of unknown type";
  try {
    throw;
  } catch (const std::exception& e) {
    try {
      what = std::string("exception: ") + e.what();
    } catch (...) {
    }
  } catch (...) {
  }
  report_background(cfg, source, {}, std::move(what));
}

}  // namespace detail

namespace detail {
std::string& error_text_slot() noexcept {
  thread_local std::string text;
  return text;
}
}  // namespace detail

const std::string& last_error_text() noexcept { return detail::error_text_slot(); }

void throw_if(const std::error_code& ec, const char* what) {
  if (!ec) return;
  const auto& text = last_error_text();
  if (text.empty()) throw error(ec, what);
  if (is_tls_failure(ec)) throw error(ec, std::string(what) + ": " + text, error::whole_message);
  throw error(ec, std::string(what) + ": " + text);
}

}  // namespace redlease
