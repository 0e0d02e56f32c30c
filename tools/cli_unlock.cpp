// SPDX-License-Identifier: MIT
// `redlease unlock --force NAME...`: delete a lock whoever holds it and wake its waiters
// (Redisson's forceUnlock). Only the forced form exists: the holder is another process.
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {
namespace {

// A lock's hash holds holders (is_lock_hash_entry, the rule the acquisitions apply). The first
// fields HSCAN gives are looked at: a typo that names an application's hash ("user:42" with "name",
// "email") must not delete it. Empty when it looks like a lock; else the first field that does not.
std::string field_that_is_no_holder(client& c, const std::string& name) {
  auto r = lock_command(c, name, {"HSCAN", name, "0", "COUNT", "100"});
  if (!r.is_array() || r.elements.size() != 2 || !r.elements[1].is_array()) return {};
  const auto& kv = r.elements[1].elements;
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (!is_lock_hash_entry(kv[i].str, kv[i + 1].str)) return std::string(kv[i].str);
  }
  return {};
}


struct unlock_options {
  std::string url = default_url();
  std::vector<std::string> names;
  bool force = false;
};

int unlock(const unlock_options& o) {
  if (!o.force) {
    std::cerr << "redlease unlock: only a forced unlock is possible from the command line (the holder is\n"
                 "another process); run `redlease unlock --force NAME` to delete the lock whoever holds it.\n";
    return exit_code::usage;
  }
  client c{make_config(o.url)};
  c.ping();
  int status = exit_code::ok;
  for (const auto& name : o.names) {
    std::string type = lock_command(c, name, {"TYPE", name}).str;
    std::string kind = type == "hash" ? "reentrant" : "mutex";
    bool existed;
    if (type == "hash") {
      // Each kind wakes its waiters on its own channels: a read-write lock's (it has a mode), or the
      // head of a fair lock's queue (a reentrant hash with waiters queued beside it).
      std::error_code ec;
      if (!lock_command(c, name, {"HGET", name, "mode"}).is_nil()) {
        kind = "read-write";
      } else if (auto odd = field_that_is_no_holder(c, name); !odd.empty()) {
        std::cerr << "redlease unlock: " << '"' << printable(name) << '"' << " is not a lock (a hash with the field "
                  << '"' << printable(odd) << '"' << ", where a lock has holders <client id>:<id> with counts); "
                  << "left alone\n";
        status = exit_code::data_error;
        continue;
      } else if (c.command({"LLEN", describe(lock_kind::fair, name).queue_key}, ec).integer > 0 && !ec) {
        kind = "fair";
      }
      existed = kind == "read-write" ? c.write_lock(name).force_unlock()
                : kind == "fair"     ? c.fair_lock(name).force_unlock()
                                     : c.lock(name).force_unlock();
    } else if (type == "string") {
      existed = c.mutex(name).force_unlock();
    } else if (type == "none") {
      existed = false;
    } else {
      std::cerr << "redlease unlock: " << '"' << printable(name) << '"' << " is not a lock (a " << type << "); left alone\n";
      status = exit_code::data_error;
      continue;
    }
    if (existed) {
      std::cout << "unlocked " << '"' << printable(name) << '"' << " (" << kind << ")\n";
    } else {
      std::cout << '"' << printable(name) << '"' << " was not locked\n";
    }
  }
  return status;
}

}  // namespace

void setup_unlock(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<unlock_options>(
      app, action, "unlock", "Force-unlock locks: delete them whoever holds them and wake their waiters",
      "The holder is not told until its next renewal (a redlease holder then loses the lock: `redlease\n"
      "run` stops its command and exits 76). A name that is not locked is reported and is not an error;\n"
      "a key that is neither a hash nor a string, or a hash whose fields are not a lock's holders, is left\n"
      "alone.\n"
      "Exit status: 0 done; 64 usage (no --force, an empty name); 65 some key is not a lock (the others\n"
      "are unlocked); 69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis);\n"
      "78 an ACL permission the user lacks or a renamed command; 70 an unexpected error.",
      unlock);
  cmd->add_option("names", o->names, "The locks' names")->required()->check(lock_name_validator());
  cmd->add_flag("--force", o->force, "Required: delete the lock whoever holds it");
  add_connection_flags(cmd, o->url);
}

}  // namespace redlease::cli
