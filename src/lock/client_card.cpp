// SPDX-License-Identifier: MIT
// The client's card: its key, its fields, and when the engine writes it (card_keeper).
#include "lock/client_card.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "redlease/client_card.hpp"
#include "redlease_lua.hpp"
#include "runtime/lock_runtime.hpp"

namespace redlease {

std::string client_card_key(std::string_view client_id) {
  std::string k = "redlease:client:{";
  k += client_id;
  k += '}';
  return k;
}

std::string_view client_card_pattern() noexcept { return "redlease:client:{*}"; }

std::string client_card_wait_field(std::string_view lock_name) {
  std::string f = "waiting:";
  f += lock_name;
  return f;
}

std::string_view client_id_of_holder(std::string_view holder) noexcept {
  auto colon = holder.find(':');
  return colon == std::string_view::npos ? std::string_view() : holder.substr(0, colon);
}

namespace detail {

ms card_keeper::ttl_floor{std::chrono::minutes(1)};

}  // namespace detail

std::chrono::milliseconds client_card_ttl(const config& cfg) noexcept {
  return std::max<std::chrono::milliseconds>(detail::card_keeper::ttl_floor, 2 * cfg.watchdog_timeout);
}

namespace detail {
namespace {

long long epoch_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string program_name() {
#if defined(__GLIBC__)
  return program_invocation_short_name;
#else
  return "?";
#endif
}

}  // namespace

card_keeper::card_keeper(lock_runtime& c)
    : c_(c), on_(c.cfg().client_card), key_(client_card_key(c.uuid())), ttl_(client_card_ttl(c.cfg())) {
  if (!on_) return;
  fields_ = {"host", host_name(), "pid", std::to_string(::getpid()), "program", program_name(),
             "name", c.cfg().client_name, "started", std::to_string(epoch_now_ms())};
}

// A refusal that will not pass (the ACL, a renamed command, a key of another type) ends the card:
// the locks do not need it, and a warning per lock would drown what matters.
reply_handler card_keeper::on_reply() {
  return [refused = refused_](std::error_code ec, reply) {
    if (ec == errc::no_permission || ec == errc::unknown_command || ec == errc::wrong_type ||
        ec == errc::server_error)
      *refused = true;
  };
}

void card_keeper::write(std::string_view extra_field, std::string_view extra_value) {
  arg_list a;
  a.add(1LL).add(key_).add(ttl_.count());
  for (const auto& f : fields_) a.add(f);
  if (!extra_field.empty()) a.add(extra_field).add(extra_value);
  written_ = true;
  written_at_ = clock::now();
  // As EVAL: an EVALSHA answered NOSCRIPT (a fresh server) would be sent again behind the
  // acquisition it precedes, and the grant be seen before the card.
  auto r = keyed_request::script_call(key_, lua::client_card, std::move(a), on_reply(), true);
  r.always_eval = true;
  c_.exec(std::move(r));
}

void card_keeper::touch(clock::time_point now) {
  if (!on_ || *refused_) return;
  if (written_ && now - written_at_ < ttl_ / 2) return;
  write();
}

bool card_keeper::wait_started(const std::string& name, lock_kind kind) {
  if (!on_ || *refused_ || kind != lock_kind::write) return false;
  if (waits_[name]++ > 0) return true;
  // With the card's own fields: the card may have expired (a wait that began long after the
  // client's last lock), and a wait field alone would say nothing of whose it is.
  write(client_card_wait_field(name), "write since " + std::to_string(epoch_now_ms()));
  return true;
}

void card_keeper::wait_ended(const std::string& name) {
  auto it = waits_.find(name);
  if (it == waits_.end() || --it->second > 0) return;
  waits_.erase(it);
  if (!on_ || *refused_) return;
  std::string cmd;
  encode_command(cmd, {"HDEL", key_, client_card_wait_field(name)});
  c_.exec(key_, std::move(cmd), on_reply(), true);
}

void card_keeper::close(ms keep) {
  if (!on_ || *refused_ || !written_) return;
  std::string cmd;
  if (keep.count() > 0) encode_command(cmd, {"PEXPIRE", key_, std::to_string(keep.count())});
  else encode_command(cmd, {"DEL", key_});
  on_ = false;
  c_.exec(key_, std::move(cmd), [](std::error_code, reply) {}, true);
}

}  // namespace detail
}  // namespace redlease
