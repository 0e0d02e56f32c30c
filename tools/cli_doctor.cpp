// SPDX-License-Identifier: MIT
// `redlease doctor [--redis URL] [--json] [--probe] [--acl-user USER] [NAME-PATTERN]`: checks a Redis
// deployment for locks the way an operator would — connectivity, latency, version, topology, the
// user's permissions for every command and script the locks send (ACL DRYRUN, or a live probe),
// eviction, memory, persistence, min-replicas-to-write, renamed commands and the clock — one line
// per check with OK / WARN / FAIL and what to do (docs/cli.md, "redlease doctor").
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor_checks.hpp"

namespace redlease::cli {
namespace {

using namespace checkup;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// ---- connection failures ----------------------------------------------------------------------

// What to change for a TLS failure, with the CLI's flags (docs/cli.md, "Connecting"); empty for a
// code that is not TLS's.
std::string tls_advice(std::error_code code) {
  if (code == errc::tls_untrusted_certificate)
    return "the server's certificate is signed by a CA this machine does not trust: pass that CA with --cacert FILE "
           "(or $REDLEASE_CACERT); --insecure skips the verification (tests only)";
  if (code == errc::tls_name_mismatch)
    return "the certificate does not name the host connected to: connect with a name it holds (the URL's host, or "
           "--sni NAME), or give the server a certificate for this host; --insecure skips the check (tests only)";
  if (code == errc::tls_certificate_expired)
    return "the server's certificate has expired or is not valid yet: renew it (tls-cert-file), or check the clocks "
           "of this machine and the server";
  if (code == errc::tls_client_certificate_required)
    return "the server wants a client certificate (tls-auth-clients yes): pass --cert FILE --key FILE, signed by a "
           "CA the server trusts (tls-ca-cert-file)";
  if (code == errc::tls_expected_by_server) return "the port speaks TLS: use rediss:// (or --tls)";
  if (code == errc::tls_not_offered_by_server)
    return "the port does not speak TLS: use redis://, or the server's tls-port";
  if (code == errc::tls_bad_files)
    return "check --cacert, --cert and --key: each must be a readable PEM file, and the key must match the "
           "certificate";
  if (code == errc::tls_not_supported) return "TLS is not supported on a unix socket: connect over TCP (rediss://)";
  if (code == errc::tls_handshake_failed)
    return "the TLS handshake failed (no common version or cipher, or an alert): compare the server's tls-protocols "
           "and tls-ciphers with this client's OpenSSL";
  return {};
}

// ---- the checks -------------------------------------------------------------------------------

// 1. Connectivity and authentication; false if the server cannot be used at all.
bool check_connectivity(client& c, context& cx, report& r) {
  std::string where = cx.cfg.redacted_url();
  std::string ping_refused;  // connected and authenticated, but PING answered with an error (NOPERM)
  std::error_code ping_code;
  std::optional<redlease::error> failure;
  try {
    c.ping();
  } catch (const redlease::error& e) {
    auto code = e.code();
    // A refusal of the PING itself comes from a server that let us in; its words are in
    // last_error_text(), as they are for a refused connection (maxclients, LOADING, a wrong password).
    if (code == errc::no_permission || code == errc::unknown_command || code == errc::server_error) {
      ping_refused = last_error_text().empty() ? std::string(e.what()) : last_error_text();
      ping_code = code;
    } else {
      failure = e;
    }
  }
  if (failure) {
    const redlease::error& e = *failure;
    const std::string words = last_error_text();
    // what() is "client::ping <url>: <the server's words>: <reason>"; the line names the URL already.
    std::string detail = cli_words(e.what());
    if (auto at = detail.find(where + ": "); at != std::string::npos) detail = detail.substr(at + where.size() + 2);
    auto code = e.code();
    // (A peer that is not Redis: its bytes are no server's words.)
    std::string advice = code == errc::protocol_error ? std::string() : advice_for(cx, code, words);
    if (contains(words, "DENIED") || contains(words, "protected mode")) {
      // DENIED's text is a page long: its first sentence says it.
      if (auto end = detail.find(". "); end != std::string::npos && detail.size() > 160) detail.resize(end + 1);
      advice = "the server is in protected mode (no password, and this client is not on its loopback interface): "
               "set a password (requirepass, or an ACL user) and connect with it, or bind it to trusted "
               "interfaces only and set protected-mode no";
    }
    if (!advice.empty()) {
      // said above: the server's words name the cause
    } else if (code == errc::auth_failed) {
      advice = "check the password ($REDLEASE_PASSWORD, or the URL) and the user (redis://USER:PASSWORD@host); the "
               "user must be `on` (ACL LIST)";
    } else if (auto tls = tls_advice(code); !tls.empty()) {
      advice = std::move(tls);
    } else if (code == errc::protocol_error) {
      advice = "the port does not belong to a Redis server: check the host and port";
    } else if (code == errc::connect_failed || code == errc::connect_timeout || code == errc::connection_lost) {
      advice = "is redis-server running and listening there? (bind, port, protected-mode, firewall)";
    } else if (code == errc::select_failed) {
      advice = "the database number in the URL does not exist on this server (databases in redis.conf)";
    }
    r.fail("connectivity", where + ": " + detail, advice);
    return false;
  }
  std::error_code ec;
  auto who = c.command({"ACL", "WHOAMI"}, ec);
  std::string how;
  if (!ec && who.is_string()) {
    cx.user = who.str;
    how = "user " + cx.user;
  } else {
    cx.user = cx.cfg.username.empty() ? "default" : cx.cfg.username;
    how = "user " + cx.user + " (ACL WHOAMI refused: " + error_text(who, ec) + ")";
  }
  std::string detail = where + ", " + how + (cx.cfg.password.empty() ? ", no password" : ", authenticated");
  if (!ping_refused.empty()) {
    cx.ping_refused = true;
    r.fail("connectivity", detail + ", but PING is refused: " + ping_refused + " (the client's health checks send it)",
           advice_for(cx, ping_code, ping_refused));
  } else {
    r.ok("connectivity", detail);
  }
  return true;
}

void check_latency(client& c, report& r) {
  std::vector<long long> us;
  std::string failure;
  for (int i = 0; i < 20; ++i) {
    std::error_code ec;
    auto t0 = steady::now();
    auto rep = c.command({"PING"}, ec);
    auto t1 = steady::now();
    if (ec) {
      failure = error_text(rep, ec);
      break;
    }
    us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
  }
  if (us.empty()) {
    r.fail("latency", "PING failed: " + failure, "");
    return;
  }
  std::sort(us.begin(), us.end());
  long long median = us[us.size() / 2];
  std::string detail = "PING median " + fmt_us(median) + " (min " + fmt_us(us.front()) + ", max " + fmt_us(us.back()) +
                       ", " + std::to_string(us.size()) + " round trips)";
  if (!failure.empty()) detail += "; then PING failed: " + failure;
  if (median > 50'000)
    r.warn("latency", detail,
           "every acquisition, hand-off and renewal costs a round trip: leases and waits must be far longer than this");
  else
    r.ok("latency", detail);
}

void read_info(client& c, context& cx) {
  std::error_code ec;
  auto rep = c.command({"INFO"}, ec);  // the default sections: server, memory, persistence, replication, ...
  if (ec || !rep.is_string()) {
    cx.info_error = error_text(rep, ec);
    return;
  }
  cx.info = parse_info(rep.str);
  if (auto v = cx.info->get("redis_version")) cx.version = parse_version(*v);
}


void check_version(context& cx, report& r) {
  if (!cx.info) {
    r.warn("version", "cannot read INFO: " + cx.info_error, info_advice);
    return;
  }
  auto text = cx.info->get("redis_version");
  if (!text || !cx.version) {
    r.warn("version", "INFO has no readable redis_version", "");
    return;
  }
  int major = (*cx.version)[0];
  std::string v = "Redis " + std::string(*text);
  if (major < 6) {
    r.fail("version", v + ": redlease needs Redis 6.0 or newer (ACL users, the scripts' commands)",
           "upgrade the server to Redis 6.2 or 7.x");
  } else if (major == 6) {
    r.ok("version", v + " (>= 6.0); 7.x would add ACL DRYRUN (the permission check without touching keys) and "
                        "the `#!lua flags=allow-oom` release (at maxmemory, Redis 6 refuses a release that only "
                        "decrements a re-entered hold)");
  } else {
    r.ok("version", v + " (>= 7: ACL DRYRUN, and the release script declares `#!lua flags=allow-oom`)");
  }
}

void check_topology(context& cx, report& r) {
  if (!cx.info) {
    r.warn("topology", "cannot read INFO replication: " + cx.info_error, info_advice);
    return;
  }
  std::string role(cx.info->get("role").value_or("?"));
  long long replicas = cx.info->integer("connected_slaves").value_or(0);
  if (role == "slave" || role == "replica") {
    std::string master = std::string(cx.info->get("master_host").value_or("?")) + ":" +
                         std::string(cx.info->get("master_port").value_or("?"));
    r.warn("topology",
           "a replica of " + master + " (link " + std::string(cx.info->get("master_link_status").value_or("?")) +
               "): locks taken here fail with READONLY, and reads lag the master",
           "locks must be taken on the master: point --redis (and your services) at " + master);
    return;
  }
  std::string detail = role + ", " + std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  for (long long i = 0; i < replicas && i < 8; ++i) {
    auto s = cx.info->get("slave" + std::to_string(i));
    if (!s) continue;
    auto f = info_subfields(*s);
    detail += i == 0 ? " (" : ", ";
    detail += (f.count("ip") ? f["ip"] : "?") + ":" + (f.count("port") ? f["port"] : "?") + " " +
              (f.count("state") ? f["state"] : "?") + (f.count("lag") ? " lag " + f["lag"] + " s" : "");
    if (i + 1 == replicas || i == 7) detail += ")";
  }
  bool cluster_mode = cx.info->get("redis_mode").value_or("") == "cluster";
  if (cluster_mode && cx.cluster) {
    r.ok("topology", detail + ", a cluster node");
  } else if (cluster_mode) {
    // Reached without slot routing: ?cluster=no, or CLUSTER SLOTS refused to this user.
    r.warn("topology",
           detail + "; a cluster node, but this client talks to it alone (?cluster=no in the URL, or CLUSTER SLOTS "
                    "refused): a lock whose slot another master serves gets MOVED",
           "drop ?cluster=no from the URL (and grant +cluster|slots), so that each lock goes to its slot's master");
  } else {
    r.ok("topology", detail);
  }
}

// Every check of one server, after its connectivity.
void server_checks(client& c, context& cx, report& r) {
  if (!cx.ping_refused) check_latency(c, r);
  read_info(c, cx);
  check_version(cx, r);
  check_topology(cx, r);
  check_permissions(c, cx, r);
  check_eviction(c, cx, r);
  check_memory(c, cx, r);
  check_persistence(c, cx, r);
  check_commands(c, r);
  check_clock(c, r);
}

// A cluster: what CLUSTER SLOTS (through the node given) shows, every master's own checks (each line
// naming it), then the cluster's settings. ACLs, memory and settings are per node, so each master is
// connected to alone; the live probe's locks still go to their slot's master through `keyed`.
void check_cluster_masters(client& keyed, const context& cx, const cluster_layout& layout, report& r) {
  long long replicas = 0;
  for (const auto& m : layout.masters) replicas += static_cast<long long>(m.replicas.size());
  std::string detail = std::to_string(layout.masters.size()) + " masters, " + std::to_string(replicas) +
                       " replicas, " + std::to_string(layout.covered()) +
                       " of 16384 slots served (CLUSTER SLOTS, through " + cx.cfg.host + ":" +
                       std::to_string(cx.cfg.port) + ")";
  if (layout.covered() < 16384)
    r.fail("cluster", detail, "locks whose names hash to an unserved slot fail (CLUSTERDOWN): assign every slot "
                              "(CLUSTER ADDSLOTS, or redis-cli --cluster fix)");
  else
    r.ok("cluster", detail + "; each lock is taken on its slot's master");
  std::vector<std::unique_ptr<client>> clients;
  std::vector<client*> masters;
  for (const auto& m : layout.masters) {
    context node = cx;
    node.cluster = true;
    node.keyed = &keyed;
    auto nc = node_client(cx.cfg, m.address);
    node.cfg = nc->get_config();
    r.set_node(m.address.name());
    if (check_connectivity(*nc, node, r)) {
      node.checked = cx.opts.acl_user.empty() ? node.user : cx.opts.acl_user;
      server_checks(*nc, node, r);
      masters.push_back(nc.get());
    } else {
      masters.push_back(nullptr);
    }
    clients.push_back(std::move(nc));
  }
  r.set_node("");
  check_cluster_settings(layout, masters, r);
}

int doctor(const doctor_options& o) {
  report r(o.json);
  context cx;
  cx.opts = o;
  cx.cfg = make_config(o.url);
  cx.cfg.request_timeout = 2000ms;  // a doctor answers promptly
  cx.cfg.on_error = [](const background_error&) {};  // the checks report what matters
  cx.sample = sample_of(o.pattern);
  cx.mutex_sample = sample_of(o.pattern, "redlease-doctor-mutex");
  client c{cx.cfg};
  if (!check_connectivity(c, cx, r)) {
    r.summary();
    return exit_code::unavailable;
  }
  cx.checked = o.acl_user.empty() ? cx.user : o.acl_user;
  auto layout = read_cluster(c);
  if (!layout) {
    server_checks(c, cx, r);
  } else {
    check_cluster_masters(c, cx, *layout, r);
  }
  r.summary();
  return r.fails() ? exit_code::config_problem : exit_code::ok;
}

}  // namespace

void setup_doctor(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<doctor_options>(
      app, action, "doctor", "Check a Redis deployment for locks: one line per check, OK/WARN/FAIL",
      "Checks connectivity, version, topology, the user's permissions for every command and script the\n"
      "locks send on a sample name matched by NAME-PATTERN (ACL DRYRUN; a live lock/unlock where DRYRUN is\n"
      "refused), eviction policy, memory, persistence, min-replicas-to-write, renamed commands, clock.\n"
      "As an administrator, --acl-user USER checks another user's permissions without touching any key.\n"
      "On a Redis Cluster, every master is checked (each line names it), then the cluster's settings:\n"
      "cluster-require-full-coverage, replicas per master, sharded pub/sub.\n"
      "Exit status: 0 nothing FAILs; 78 some check FAILs; 69 Redis unreachable, authentication or TLS\n"
      "failed, or the server refuses the connection (only the connectivity line is printed); 64 usage;\n"
      "70 an unexpected error.",
      doctor);
  cmd->add_option("pattern", o->pattern, "The lock names to check, as an ACL key pattern (default: *)");
  add_connection_flags(cmd, o->url);
  cmd->add_flag("--json", o->json, "One JSON object per check per line (check, status, detail, advice)");
  cmd->add_option("--acl-user", o->acl_user,
                  "Check this ACL user's permissions with ACL DRYRUN (connect as an administrator); default: the "
                  "connected user");
  cmd->add_flag("--probe", o->probe,
                "Also take and release a lock and a mutex on the sample name when ACL DRYRUN is available");
}

}  // namespace redlease::cli
