// SPDX-License-Identifier: MIT
// `redlease status NAME... [--json]`: what each lock looks like on the server: free or held, its
// kind, holders and hold counts, remaining TTL, and how many clients wait on its unlock channel.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client_cards.hpp"
#include "cluster_view.hpp"
#include "info_parser.hpp"
#include "commands.hpp"
#include "redlease/redlease.hpp"
#include "status_format.hpp"
#include "status_redlock.hpp"

namespace redlease::cli {
namespace {

struct status_options {
  std::vector<std::string> urls;  // --redis, in the order given; none: $REDLEASE_URL
  std::vector<std::string> names;
  bool json = false, redlock = false;
};

struct holder {
  std::string owner;  // Redisson field "<client uuid>:<thread id>", or the mutex token
  std::string count;  // hold count as stored
};

struct channel_count {
  std::string channel;
  long long subscribers = 0;
};

struct lock_status {
  std::string name;
  std::string node;  // on a cluster: host:port of the master serving the slot
  int slot = -1;     // on a cluster: the name's hash slot
  std::string state;  // free | held | set (a semaphore's or a latch's count) | other
  std::string kind;   // none | reentrant | mutex | semaphore | latch | semaphore or latch | the Redis type of another key
  std::string value;  // a string key holding a whole number: a semaphore's permits or a latch's count
  long long ttl_ms = -2;
  std::vector<holder> holders;
  std::vector<channel_count> channels;
  std::string mode;                // a read-write lock's mode: read | write
  long long holder_count = 0;      // all the hash's holder fields; `holders` has at most list_cap
  std::vector<std::string> queue;  // a fair lock's waiters, head first: at most list_cap
  long long queue_length = 0;      // all of them
  std::string problem;             // a key of the kind holding another type: what and where
  std::map<std::string, card_view> cards;  // the holders' clients' cards, by client id
  waiting_writers writers;                 // a read-write lock's, from the cards
  const card_view* card_of(const holder& h) const {
    auto it = cards.find(std::string(client_id_of_holder(h.owner)));
    return it == cards.end() ? nullptr : &it->second;
  }
  long long waiters() const {
    long long n = queue_length;  // a fair lock's waiters listen on channels of their own
    for (auto& c : channels) n += c.subscribers;
    return n;
  }
};

// A string holding a whole number: a semaphore's permits or a latch's count (a redlease mutex's token
// is 32 hex digits, which no long long holds), or some other library's mutex value.
const std::string count_kinds = "semaphore or latch";
const std::string mutex_without_expiry = "warning: no expiry: held by a value redlease did not write; it will never expire";

// Which of the kinds a whole number can be is told by who waits: the waiters of one kind only name
// it; none, or several, leave both counting kinds (the channels are the mutex's, the semaphore's,
// the latch's, in that order, at the end of `s.channels`).
void tell_count_kind(lock_status& s) {
  const auto n = s.channels.size();
  const long long mutex = s.channels[n - 3].subscribers, semaphore = s.channels[n - 2].subscribers,
                  latch = s.channels[n - 1].subscribers;
  if (mutex > 0 && semaphore == 0 && latch == 0) {
    s.kind = "mutex";
    s.holders.push_back({s.value, "1"});
    s.value.clear();
    if (s.ttl_ms == -1) s.problem = mutex_without_expiry;
    return;
  }
  s.state = "set";
  if (semaphore > 0 && latch == 0 && mutex == 0) s.kind = "semaphore";
  else if (latch > 0 && semaphore == 0 && mutex == 0) s.kind = "latch";
}

// A hash that crashed readers grew, or a queue that crashed waiters grew, can hold a million
// entries: status lists the first list_cap of each and counts the rest, so that it neither copies
// them all (HGETALL of 300,000 fields kept the server busy for a quarter of a second) nor prints them.
constexpr std::size_t list_cap = 100;

lock_status inspect(client& c, const std::string& name, cluster_view* cv) {
  lock_status s;
  s.name = name;
  const cluster_master* home = nullptr;
  if (cv != nullptr) {
    s.slot = slot_of(c, name);
    home = cv->layout.master_of(s.slot);
    s.node = home != nullptr ? home->address.name() : "none (slot not served)";
  }
  std::string type = lock_command(c, name, {"TYPE", name}).str;
  if (type == "hash") {
    auto add = [&s](const reply& fields) {
      for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
        // Redisson's read-write lock keeps its mode among the owners' fields.
        if (fields.elements[i].str == "mode") s.mode = fields.elements[i + 1].str;
        else if (s.holders.size() < list_cap) s.holders.push_back({fields.elements[i].str, fields.elements[i + 1].str});
      }
    };
    long long fields = lock_command(c, name, {"HLEN", name}).integer;
    if (fields <= static_cast<long long>(list_cap) + 1) {
      add(lock_command(c, name, {"HGETALL", name}));
    } else {
      auto m = lock_command(c, name, {"HGET", name, "mode"});
      if (!m.is_nil()) s.mode = m.str;
      std::string cursor = "0";
      do {
        auto step = lock_command(c, name, {"HSCAN", name, cursor, "COUNT", std::to_string(list_cap)});
        if (step.elements.size() != 2) break;
        cursor = step.elements[0].str;
        add(step.elements[1]);
      } while (cursor != "0" && s.holders.size() < list_cap);
    }
    s.holder_count = fields - (s.mode.empty() ? 0 : 1);
    // An application's hash under the name is no lock (the acquisitions say wrong_type, unlock
    // leaves it alone): its first entries tell.
    auto odd = std::find_if(s.holders.begin(), s.holders.end(),
                            [](const holder& h) { return !is_lock_hash_entry(h.owner, h.count); });
    if (odd != s.holders.end()) {
      s.kind = "hash";
      s.state = "other";
      s.problem = "not a lock: the field \"" + printable(odd->owner) +
                  "\" is no holder's (<client id>:<id> holding a count)";
      s.holders.clear();
      s.holder_count = 0;
      s.mode.clear();
    } else if (!s.mode.empty()) {
      s.kind = "read-write";
    } else if (!s.holders.empty()) {
      s.kind = "reentrant";
    }
  } else if (type == "string") {
    auto v = lock_command(c, name, {"GET", name});
    const auto number = v.is_nil() ? std::nullopt : parse_integer(v.str);
    if (number) {
      s.value = std::to_string(*number);  // which kind it is: by the waiters, below
      s.kind = count_kinds;
    } else if (!v.is_nil()) {
      s.holders.push_back({v.str, "1"});
      s.kind = "mutex";
    }
  } else if (type != "none") {
    s.kind = type;
    s.state = "other";
  }
  if (s.kind.empty()) {  // none, or released between our commands
    s.kind = "none";
    s.state = "free";
  } else if (s.state.empty()) {
    s.state = "held";
  }
  if (s.state != "free") {
    auto t = lock_command(c, name, {"PTTL", name});
    s.ttl_ms = t.is_integer() ? t.integer : -2;
  }
  // A lock always has a TTL (every grant sets one): a held one without never frees itself.
  if (s.state == "held" && s.ttl_ms == -1 && s.kind != count_kinds)
    s.problem = s.kind == "mutex" ? mutex_without_expiry
                                  : "warning: no expiry: someone removed its TTL; only an unlock frees it";
  // A fair lock is a reentrant hash with a queue of waiters beside it.
  if (s.kind == "reentrant" || s.kind == "none") {
    const std::string queue = describe(lock_kind::fair, name).queue_key;
    std::error_code ec;
    auto q = c.command({"LRANGE", queue, "0", std::to_string(list_cap - 1)}, ec);
    if (ec == errc::wrong_type) {
      // Not a queue: every fair acquisition on this name fails, which is worth saying here.
      s.problem = "\"" + printable(queue) + "\" holds a " + lock_command(c, name, {"TYPE", queue}).str +
                  " where the fair lock keeps a list";
    } else if (ec) {
      throw_for_lock(ec, name, last_error_text());
    } else {
      for (auto& e : q.elements) s.queue.push_back(e.str);
      s.queue_length = s.queue.size() < list_cap ? static_cast<long long>(s.queue.size())
                                                 : lock_command(c, name, {"LLEN", queue}).integer;
      if (!s.queue.empty() && s.kind == "reentrant") s.kind = "fair";
    }
  }
  if (s.kind == "reentrant" || s.kind == "none" || s.state == "other")
    s.channels.push_back({describe(lock_kind::reentrant, name).channel(), 0});
  if (s.kind == "read-write" || s.kind == "none") s.channels.push_back({describe(lock_kind::read, name).channel(), 0});
  if (s.kind == "mutex" || s.kind == "none" || s.state == "other" || s.kind == count_kinds)
    s.channels.push_back({describe(lock_kind::mutex, name).channel(), 0});
  // A semaphore without a key has no permits, and its waiters wait; a latch without one reads 0.
  if (s.kind == "none" || s.kind == count_kinds) s.channels.push_back({describe(lock_kind::semaphore, name).channel(), 0});
  if (s.kind == count_kinds) s.channels.push_back({describe(lock_kind::latch, name).channel(), 0});
  std::vector<std::string> names;
  for (auto& ch : s.channels) names.push_back(ch.channel);
  auto counts = count_subscribers(c, name, names, cv, home);
  for (std::size_t i = 0; i < s.channels.size(); ++i) s.channels[i].subscribers = counts[i];
  if (s.kind == "none" && s.channels.back().subscribers == 0) s.channels.pop_back();  // listed when waited on
  if (s.kind == count_kinds) tell_count_kind(s);
  // Who the holders are, and (the read-write lock records no waiters) who waits to write.
  std::vector<std::string> ids;
  for (const auto& h : s.holders) ids.emplace_back(client_id_of_holder(h.owner));
  s.cards = read_cards(c, ids);
  if (s.kind == "read-write") {
    std::vector<client*> nodes{&c};
    if (cv != nullptr) {
      nodes.clear();
      for (auto& m : cv->masters) nodes.push_back(m.get());
    }
    s.writers = find_waiting_writers(nodes, name);
  }
  return s;
}

std::string to_json(const lock_status& s) {
  std::string out = "{\"lock\":" + json_string(s.name);
  if (s.slot >= 0) out += ",\"node\":" + json_string(s.node) + ",\"slot\":" + std::to_string(s.slot);
  out += ",\"state\":\"" + s.state + "\",\"kind\":" +
                    json_string(s.kind) + ",\"ttl_ms\":" + std::to_string(s.ttl_ms);
  if (!s.mode.empty()) out += ",\"mode\":" + json_string(s.mode);
  if (!s.queue.empty()) {
    out += ",\"queue\":[";
    for (std::size_t i = 0; i < s.queue.size(); ++i) out += (i ? "," : "") + json_string(s.queue[i]);
    out += "],\"queue_length\":" + std::to_string(s.queue_length);
  }
  if (s.kind == "reentrant" || s.kind == "fair" || s.kind == "read-write") {
    out += ",\"holders\":[";
    for (std::size_t i = 0; i < s.holders.size(); ++i) {
      const auto& h = s.holders[i];
      const auto n = parse_integer(h.count);
      out += (i ? ",{\"owner\":" : "{\"owner\":") + json_string(h.owner) +
             ",\"count\":" + (n ? std::to_string(*n) : json_string(h.count)) + ",\"client\":" +
             card_json(s.card_of(h)) + "}";
    }
    out += "],\"holder_count\":" + std::to_string(s.holder_count);
    if (s.kind == "read-write") {
      out += ",\"waiting_writers\":[";
      for (std::size_t i = 0; i < s.writers.found.size(); ++i) {
        const auto& w = s.writers.found[i];
        out += (i ? ",{\"client_id\":" : "{\"client_id\":") + json_string(w.client) +
               ",\"since_ms\":" + std::to_string(w.since_ms) + ",\"client\":" + card_json(&w.card) + "}";
      }
      out += std::string("],\"waiting_writers_complete\":") + (s.writers.complete ? "true" : "false");
    }
  } else if (s.kind == "mutex") {
    out += ",\"token\":" + json_string(s.holders.front().owner);
  } else if (!s.value.empty()) {
    out += ",\"value\":" + s.value;
  }
  if (!s.problem.empty()) out += ",\"problem\":" + json_string(s.problem);
  out += ",\"waiters\":" + std::to_string(s.waiters()) + ",\"channels\":[";
  for (std::size_t i = 0; i < s.channels.size(); ++i) {
    out += (i ? ",{\"channel\":" : "{\"channel\":") + json_string(s.channels[i].channel) +
           ",\"subscribers\":" + std::to_string(s.channels[i].subscribers) + "}";
  }
  out += "]}";
  return out;
}

std::string holders_text(const lock_status& s) {
  if (s.kind == "semaphore") return "permits " + s.value;
  if (s.kind == "latch") return "count " + s.value;
  if (s.kind == count_kinds) return "value " + s.value + " (a semaphore's permits or a latch's count)";
  if (s.kind == "mutex")
    return "token " + printable(s.holders.front().owner, true) + (s.problem.empty() ? "" : "; " + s.problem);
  std::string out;
  if (!s.mode.empty()) out = "mode " + printable(s.mode, true) + ": ";
  bool first = true;
  for (const auto& h : s.holders) {
    out += first ? "" : ", ";
    first = false;
    out += printable(h.owner, true) + " x" + printable(h.count, true) + " " + card_text(s.card_of(h));
  }
  auto more = [](long long all, std::size_t shown) {
    return all > static_cast<long long>(shown) ? ", ... (" + std::to_string(all) + " in all)" : std::string();
  };
  out += more(s.holder_count, s.holders.size());
  if (!s.queue.empty()) {
    out += out.empty() ? "queue: " : "; queue: ";
    for (std::size_t i = 0; i < s.queue.size(); ++i) out += (i ? ", " : "") + printable(s.queue[i], true);
    out += more(s.queue_length, s.queue.size());
  }
  if (!s.writers.found.empty()) {
    out += out.empty() ? "" : "; ";
    out += s.writers.complete ? "waiting writers: " : "waiting writers (at least): ";
    for (std::size_t i = 0; i < s.writers.found.size(); ++i)
      out += (i ? ", " : "") + printable(s.writers.found[i].client, true) + " " + card_text(&s.writers.found[i].card);
  }
  if (!s.problem.empty()) out += (out.empty() ? "" : "; ") + s.problem;
  return out.empty() ? "-" : out;
}

// On a cluster, NODE and SLOT come before HOLDERS, the long column.
void print_table(const std::vector<lock_status>& all, bool cluster) {
  std::vector<std::vector<std::string>> rows{{"LOCK", "STATE", "KIND", "TTL", "WAITERS", "HOLDERS"}};
  if (cluster) rows.front().insert(rows.front().end() - 1, {"NODE", "SLOT"});
  for (const auto& s : all) {
    rows.push_back({printable(s.name, true), s.state, s.kind, format_ttl(s.ttl_ms), std::to_string(s.waiters()),
                    holders_text(s)});
    if (cluster) rows.back().insert(rows.back().end() - 1, {s.node, std::to_string(s.slot)});
  }
  print_rows(rows);
}

int status(const status_options& o) {
  if (o.redlock) return status_redlock(o.urls, o.names, o.json);
  if (o.urls.size() > 1)
    throw error(errc::invalid_argument,
                "--redis is given " + std::to_string(o.urls.size()) +
                    " times: several servers are for --redlock (a RedLock's masters); status takes one --redis "
                    "otherwise",
                error::whole_message);
  client c{make_config(o.urls.empty() ? default_url() : o.urls.front())};
  c.ping();
  std::unique_ptr<cluster_view> cv = read_cluster_view(c);
  std::vector<lock_status> all;
  bool any_foreign = false;  // a key that is not a lock: the acquisitions fail on it (wrong_type)
  for (const auto& name : o.names) {
    auto s = inspect(c, name, cv.get());
    any_foreign = any_foreign || s.state == "other";
    if (o.json) std::cout << to_json(s) << "\n" << std::flush;
    else all.push_back(std::move(s));
  }
  if (!o.json) print_table(all, cv != nullptr);
  return any_foreign ? exit_code::data_error : exit_code::ok;
}

}  // namespace

void setup_status(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<status_options>(
      app, action, "status", "Show locks: free or held, kind, holders, TTL, waiters",
      "A string holding a whole number is a semaphore's permits or a latch's count (STATE set; KIND semaphore,\n"
      "latch, or \"semaphore or latch\" when no waiter tells which).\n"
      "On a Redis Cluster, NODE (the master serving the name's slot, whose keys are read) and SLOT\n"
      "come before HOLDERS (--json: node, slot).\n"
      "With --redlock (--redis once per master, at least 3): per master, the value under each NAME and its\n"
      "TTL, or free, and whether a majority holds one value.\n"
      "Exit status: 0 done; 65 some key is not a lock (another type, or a hash whose fields are not\n"
      "holders; with --redlock, a key that is not a string: every row is still printed); 64 usage (an\n"
      "empty name, too few masters with --redlock, several --redis without it);\n"
      "69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis; with --redlock,\n"
      "a majority of the masters: the rows are still printed); 78 the ACL user\n"
      "may not run a command status sends (TYPE, HGET, PTTL, LRANGE, PUBSUB NUMSUB...) or it is renamed;\n"
      "70 an unexpected error.",
      status);
  cmd->add_option("names", o->names, "The locks' names")->required()->check(lock_name_validator());
  // One URL per --redis (repeated for --redlock), so that a name after it is not taken for a URL.
  cmd->add_option("--redis", o->urls,
                  "Redis URL (default: $REDLEASE_URL or redis://127.0.0.1:6379); with --redlock, once per master")
      ->allow_extra_args(false);
  add_tls_flags(cmd);
  cmd->add_flag("--json", o->json, "One JSON object per lock per line");
  cmd->add_flag("--redlock", o->redlock,
                "RedLock: each lock on every master (a --redis each, at least 3), and whether a majority holds "
                "one value");
}

}  // namespace redlease::cli
