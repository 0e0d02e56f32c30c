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
    std::string type = c.command({"TYPE", name}).str;
    std::string kind = type == "hash" ? "reentrant" : "mutex";
    bool existed;
    if (type == "hash") {
      // Each kind wakes its waiters on its own channels: a read-write lock's (it has a mode), or the
      // head of a fair lock's queue (a reentrant hash with waiters queued beside it).
      std::error_code ec;
      if (!c.command({"HGET", name, "mode"}).is_nil()) kind = "read-write";
      else if (c.command({"LLEN", channel_of("redisson_lock_queue", name)}, ec).integer > 0 && !ec) kind = "fair";
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
  auto o = std::make_shared<unlock_options>();
  auto* cmd = app.add_subcommand("unlock", "Force-unlock locks: delete them whoever holds them and wake their waiters");
  cmd->footer(
      "The holder is not told until its next renewal (a redlease holder then loses the lock: `redlease\n"
      "run` stops its command and exits 76). A name that is not locked is reported and is not an error;\n"
      "a key that is neither a hash nor a string is left alone.\n"
      "Exit status: 0 done; 64 usage (no --force, an empty name); 65 some key is not a lock (the others\n"
      "are unlocked); 69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis);\n"
      "78 an ACL permission the user lacks or a renamed command; 70 an unexpected error.");
  cmd->add_option("names", o->names, "The locks' names")->required()->check(lock_name_validator());
  cmd->add_flag("--force", o->force, "Required: delete the lock whoever holds it");
  cmd->add_option("--redis", o->url, "Redis URL (default: $REDLEASE_URL or redis://127.0.0.1:6379)");
  add_tls_flags(cmd);
  cmd->callback([&action, o] { action = [o] { return unlock(*o); }; });
}

}  // namespace redlease::cli
