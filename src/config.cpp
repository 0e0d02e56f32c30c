// SPDX-License-Identifier: MIT
#include "redlease/config.hpp"

#include <cctype>
#include <charconv>
#include <chrono>
#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "base/hex.hpp"
#include "redlease/error.hpp"
#include "redlease/detail/limits.hpp"

namespace redlease {
namespace {

using detail::hex_value;

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

// The parts, one after the other. Built with append() only: g++ 12 -O3 reports a false -Wrestrict
// on `"literal" + std::string`.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto part : parts) out.append(part);
  return out;
}

// Which URL a query belongs to: each understands its own parameters.
enum class url_kind { unix_socket, plain, sentinel };

// `auto`, `yes` or `no`: 0, 1 or 2; anything else: -1.
int auto_yes_no(std::string_view v) {
  return v == "auto" ? 0 : v == "yes" ? 1 : v == "no" ? 2 : -1;
}

// Only `db=N`, `master=NAME` (Sentinels), `cluster=` and `sharded_pubsub=` (redis://) are
// understood; anything else is an error rather than silently ignored. Returns what is wrong, or
// nothing.
std::string parse_query(std::string_view query, url_kind kind, config& c) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.substr(0, 3) == "db=") {
      if (!parse_int(item.substr(3), c.database) || c.database < 0)
        return cat({"the database '", item.substr(3, 20), "' is not a number from 0"});
    } else if (kind == url_kind::sentinel && item.substr(0, 7) == "master=") {
      if (!percent_decode(item.substr(7), c.sentinel.master_name)) return "bad %-escape in the master's name";
      if (c.sentinel.master_name.empty()) return "empty master name";
    } else if (kind == url_kind::plain &&
               (item.substr(0, 8) == "cluster=" || item.substr(0, 15) == "sharded_pubsub=")) {
      auto eq = item.find('=');
      auto key = item.substr(0, eq), value = item.substr(eq + 1);
      const int v = auto_yes_no(value);
      if (v < 0) return cat({key, "='", value.substr(0, 20), "' is not auto, yes or no"});
      if (key == "cluster") {
        c.cluster.mode = v == 2 ? cluster_mode::off : cluster_mode::automatic;
      } else {
        c.cluster.sharded_pubsub = v == 0   ? sharded_pubsub_mode::automatic
                                   : v == 1 ? sharded_pubsub_mode::on
                                            : sharded_pubsub_mode::off;
      }
    } else {
      std::string_view known = kind == url_kind::sentinel ? "db=N and master=NAME"
                               : kind == url_kind::plain  ? "db=N, cluster=auto|yes|no and sharded_pubsub=auto|yes|no"
                                                          : "db=N";
      return cat({"unknown query parameter '", item.substr(0, item.find('=')).substr(0, 40), "' (only ", known, ")"});
    }
  }
  return {};
}

// `host[:port]` or `[v6]:port`; the port stays as given when absent. Returns what is wrong, or
// nothing.
std::string parse_host_port(std::string_view hostport, std::string& host_out, std::uint16_t& port_out) {
  std::string_view host, port;
  bool has_port = false;
  if (!hostport.empty() && hostport.front() == '[') {  // [IPv6]:port
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return "no ']' after the IPv6 address";
    host = hostport.substr(1, close - 1);
    auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return cat({"'", after.substr(0, 40), "' after the IPv6 address"});
      port = after.substr(1);
      has_port = true;
    }
  } else {
    auto colon = hostport.find(':');
    host = hostport.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      has_port = true;
    }
  }
  if (host.empty()) return "missing host";
  for (char ch : host)
    if (ch == ' ' || ch == '/' || ch == '@' || ch == '?' || ch == '#' || ch == ',')
      return cat({"the host '", host.substr(0, 80), "' contains '", std::string_view(&ch, 1), "'"});
  host_out = std::string(host);
  if (has_port) {
    unsigned p = 0;
    if (!parse_int(port, p) || p == 0 || p > 65535)
      return cat({"the port '", port.substr(0, 20), "' is not a number from 1 to 65535"});
    port_out = static_cast<std::uint16_t>(p);
  }
  return {};
}

// A comma-separated list of `host[:port]`, each with `default_port` when it has none. Returns what
// is wrong, or nothing.
std::string parse_host_list(std::string_view list, std::uint16_t default_port, std::vector<host_port>& out) {
  while (true) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    if (item.empty() && (comma != std::string_view::npos || !out.empty()))
      return "an empty host in the list (two commas in a row, or one at an end)";
    host_port hp;
    hp.port = default_port;
    if (auto why = parse_host_port(item, hp.host, hp.port); !why.empty()) return why;
    out.push_back(std::move(hp));
    if (comma == std::string_view::npos) return {};
    list = list.substr(comma + 1);
  }
}

constexpr std::string_view schemes =
    "the schemes are redis://, rediss:// (TLS), redis-sentinel://, rediss-sentinel://, unix:// and redis+unix://";

bool known_scheme(std::string_view s) {
  return s == "redis" || s == "rediss" || s == "redis-sentinel" || s == "rediss-sentinel" || s == "unix" ||
         s == "redis+unix";
}

// Whether `s` may be a URL scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.'), short
// enough to quote: what is not may be a password typed in the wrong place.
bool looks_like_scheme(std::string_view s) {
  if (s.empty() || s.size() > 32 || !std::isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (char ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '+' && ch != '-' && ch != '.') return false;
  return true;
}

// What is wrong with a URL that has no "://". Quotes nothing from before an '@' (a password, maybe).
std::string missing_scheme(std::string_view url) {
  const bool userinfo = url.find('@') != std::string_view::npos;
  auto colon = url.find(':');
  if (colon != std::string_view::npos) {
    auto before = url.substr(0, colon), after = url.substr(colon + 1);
    if (known_scheme(before)) return cat({"'", before, ":' must be followed by '//'"});
    if (!userinfo && !after.empty() && after.find_first_not_of("0123456789") == std::string_view::npos)
      return cat({"no scheme: for a host and port write redis://", url.substr(0, 100)});
  }
  return cat({"no scheme (", schemes, ")"});
}

// Parses `url` into `c`; returns what is wrong with it, or nothing.
std::string parse_url(std::string_view url, config& c) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return missing_scheme(url);
  auto scheme = url.substr(0, scheme_end);
  auto rest = url.substr(scheme_end + 3);
  if (scheme == "unix" || scheme == "redis+unix") {
    auto q = rest.find('?');
    auto path = rest.substr(0, q);
    if (path.empty() || path.front() != '/')
      return cat({"the socket path must be absolute (", scheme, ":///path/to/redis.sock)"});
    if (q != std::string_view::npos)
      if (auto why = parse_query(rest.substr(q + 1), url_kind::unix_socket, c); !why.empty()) return why;
    c.unix_socket = std::string(path);
    return {};
  }
  bool sentinel = scheme == "redis-sentinel" || scheme == "rediss-sentinel";
  if (scheme != "redis" && scheme != "rediss" && !sentinel) {
    if (scheme.empty()) return cat({"no scheme (", schemes, ")"});
    if (!looks_like_scheme(scheme)) return cat({"unknown scheme (", schemes, ")"});
    std::string lower(scheme);
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return cat({"unknown scheme '", scheme, "' (", schemes, known_scheme(lower) ? ", in lower case)" : ")"});
  }
  c.tls.enabled = scheme == "rediss" || scheme == "rediss-sentinel";
  c.sentinel.tls.enabled = scheme == "rediss-sentinel";

  // userinfo is split at the last '@' so that a password may contain a (percent-encoded or raw) '@'.
  auto at = rest.rfind('@');
  if (at != std::string_view::npos) {
    auto userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    // `user@host`: a user name alone (an ACL user, Redis 6+), as redis-py and node-redis read it;
    // its password comes from elsewhere (config::password, the CLI's $REDLEASE_PASSWORD).
    if (!percent_decode(userinfo.substr(0, colon), c.username) ||
        (colon != std::string_view::npos && !percent_decode(userinfo.substr(colon + 1), c.password)))
      return "bad %-escape in the user or password";
  }
  auto slash = rest.find('/');
  auto hostport = rest.substr(0, slash);
  auto path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  const auto kind = sentinel ? url_kind::sentinel : url_kind::plain;
  if (auto q = path.find('?'); q != std::string_view::npos) {
    if (auto why = parse_query(path.substr(q + 1), kind, c); !why.empty()) return why;
    path = path.substr(0, q);
  }
  if (!path.empty() && (!parse_int(path, c.database) || c.database < 0))
    return cat({"the database '", path.substr(0, 20), "' is not a number from 0"});

  // A query may also follow the host list directly: `redis-sentinel://h1,h2?master=m`.
  if (auto q = hostport.find('?'); q != std::string_view::npos && slash == std::string_view::npos) {
    if (auto why = parse_query(hostport.substr(q + 1), kind, c); !why.empty()) return why;
    hostport = hostport.substr(0, q);
  }
  if (sentinel) {
    if (auto why = parse_host_list(hostport, host_port{}.port, c.sentinel.nodes); !why.empty()) return why;
    if (c.sentinel.master_name.empty()) return "missing ?master=NAME (the master's name the Sentinels know)";
    return {};
  }
  // The first host is the one to connect to; the others are cluster seeds.
  std::vector<host_port> hosts;
  if (auto why = parse_host_list(hostport, c.port, hosts); !why.empty()) return why;
  c.host = std::move(hosts.front().host);
  c.port = hosts.front().port;
  c.cluster.seeds.assign(std::make_move_iterator(hosts.begin() + 1), std::make_move_iterator(hosts.end()));
  if (c.cluster.seeds.empty()) return {};
  if (c.cluster.mode == cluster_mode::off) return "cluster=no takes one host (several are a Redis Cluster's seeds)";
  if (c.database != 0)
    return cat({"several hosts with database ", std::to_string(c.database), ": a Redis Cluster has only database 0"});
  return {};
}

// The URL as a message may quote it: never its user and password. Split where the parser splits
// them, at the last '@' (a URL whose query holds an '@' loses more than it must); also when the
// scheme is mistyped or missing ("user:pw@host", "redis:/...", "redis//..."): what comes before the
// '@' may be a password all the same.
std::string url_without_userinfo(std::string_view url) {
  std::string shown(url.substr(0, 200));
  auto scheme_end = url.find("://");
  auto at = url.rfind('@');
  if (at != std::string_view::npos) {
    const bool schemed = scheme_end != std::string_view::npos && at > scheme_end;
    shown = cat({schemed ? url.substr(0, scheme_end + 3) : std::string_view(), "***@", url.substr(at + 1, 200)});
  }
  return shown;
}

// Appends `s` percent-encoded for the user part of a URL's userinfo: everything but RFC 3986's
// unreserved characters and sub-delims, so ':' '@' '/' '%' (and spaces, controls, non-ASCII) are
// encoded and from_url() decodes it back to `s`.
void append_userinfo_encoded(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  static constexpr std::string_view keep = "-._~!$&'()*+,;=";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    const bool alnum = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9');
    if (alnum || keep.find(ch) != std::string_view::npos) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0xf]);
    }
  }
}

}  // namespace

config config::from_url(std::string_view url, std::error_code& ec) {
  ec.clear();
  config c;
  std::string why = parse_url(url, c);
  if (why.empty()) return c;
  ec = errc::invalid_url;
  detail::error_text_slot() = std::move(why);
  return config{};
}

config config::from_url(std::string_view url) {
  config c;
  std::string why = parse_url(url, c);
  if (why.empty()) return c;
  throw error(errc::invalid_url, cat({"invalid Redis URL \"", url_without_userinfo(url), "\": ", why}),
              error::whole_message);
}

std::string config::invalid_setting() const {
  constexpr long long longest = detail::max_duration.count();
  auto in_range = [](const char* name, std::chrono::milliseconds v, long long min, long long max) -> std::string {
    if (v.count() < min)
      return std::string(name) + " must be at least " + std::to_string(min) + " ms (it is " +
             std::to_string(v.count()) + " ms)";
    if (v.count() > max)
      return std::string(name) + " must be at most " + std::to_string(max) + " ms (it is " +
             std::to_string(v.count()) + " ms)";
    return {};
  };
  // A zero or negative delay or timeout is no bound: a reconnect loop at full speed, a request
  // that times out before it is sent, a doubling that overflows. A longer one than max_duration
  // overflows the clock's nanoseconds when added to now (milliseconds::max(), the natural "no
  // timeout", made every request time out at once and the watchdog loop grant and undo).
  for (auto e : {in_range("connect_timeout", connect_timeout, 1, longest),
                 in_range("request_timeout", request_timeout, 1, longest),
                 in_range("close_timeout", close_timeout, 0, longest),
                 in_range("reconnect_min_delay", reconnect_min_delay, 1, longest),
                 in_range("reconnect_max_delay", reconnect_max_delay, reconnect_min_delay.count(), longest),
                 in_range("health_check_interval", health_check_interval, 0, longest),
                 // Renewed every third of it: a lease of a few round trips is lost between renewals, and
                 // one shorter than a round trip is stale before its grant arrives (a grant-undo loop).
                 in_range("watchdog_timeout", watchdog_timeout, 100, longest),
                 // A waiter re-checks up to ten times this apart.
                 in_range("mutex_poll_cap", mutex_poll_cap, 1, longest / 16),
                 in_range("queue_allowance", queue_allowance, 1, longest),
                 in_range("max_hold", max_hold, 0, longest),
                 in_range("sentinel.timeout", sentinel.timeout, 1, longest),
                 in_range("sentinel.poll_interval", sentinel.poll_interval, 0, longest),
                 // WAIT's 0 is "block until acknowledged": the command connection would stall behind
                 // it for as long as a replica is down.
                 in_range("replica_ack.timeout", replica_ack.timeout, 1, longest),
                 in_range("cluster.refresh_interval", cluster.refresh_interval, 1, longest),
                 in_range("cluster.probe_timeout", cluster.probe_timeout, 1, longest)}) {
    if (!e.empty()) return e;
  }
  for (std::size_t i = 0; i < cluster.seeds.size(); ++i) {
    const std::string index = std::to_string(i);
    if (cluster.seeds[i].host.empty()) return cat({"cluster.seeds[", index, "]: the host must not be empty"});
    if (cluster.seeds[i].port == 0)
      return cat({"cluster.seeds[", index, "]: the port must be from 1 to 65535 (it is 0)"});
  }
  if (watchdog_batch_size < 1) return "watchdog_batch_size must be at least 1";
  if (metrics_prefix.max_prefixes < 1 || metrics_prefix.max_prefixes > 10000)
    return cat({"metrics_prefix.max_prefixes must be from 1 to 10000 (it is ", std::to_string(metrics_prefix.max_prefixes),
                ")"});
  // Nothing Redis sends nests more than a few levels, and a decoded reply is freed recursively.
  if (max_reply_depth < 1 || max_reply_depth > max_reply_depth_limit)
    return "max_reply_depth must be from 1 to " + std::to_string(max_reply_depth_limit) + " (it is " +
           std::to_string(max_reply_depth) + ")";
  if (max_reply_elements < 1) return "max_reply_elements must be at least 1";
  return {};
}

std::string config::redacted_url() const {
  // Built with append() only: g++ 12 -O3 reports a false -Wrestrict on `"literal" + std::string`.
  std::string out;
  if (!unix_socket.empty()) {
    out.append("unix://").append(unix_socket);
    if (database) out.append("?db=").append(std::to_string(database));
    return out;
  }
  if (sentinel.nodes.empty()) out.append(tls.enabled ? "rediss://" : "redis://");
  else out.append(tls.enabled ? "rediss-sentinel://" : "redis-sentinel://");
  if (!username.empty()) {
    append_userinfo_encoded(out, username);
    out.append(password.empty() ? "@" : ":***@");
  } else if (!password.empty()) {
    out.append(":***@");
  }
  auto append_host = [&out](const std::string& h, std::uint16_t p) {
    // Bracketed as from_url reads it: an IPv6 address, or a host that starts with '['.
    if (h.find(':') != std::string::npos || (!h.empty() && h.front() == '[')) {
      out.append("[").append(h).append("]");
    } else {
      out.append(h);
    }
    out.append(":").append(std::to_string(p));
  };
  if (sentinel.nodes.empty()) {
    append_host(host, port);
    for (const auto& seed : cluster.seeds) {
      out.append(",");
      append_host(seed.host, seed.port);
    }
  } else {
    for (std::size_t i = 0; i < sentinel.nodes.size(); ++i) {
      if (i) out.append(",");
      append_host(sentinel.nodes[i].host, sentinel.nodes[i].port);
    }
  }
  if (database) out.append("/").append(std::to_string(database));
  if (!sentinel.nodes.empty()) {
    out.append("?master=");
    append_userinfo_encoded(out, sentinel.master_name);
    return out;
  }
  char sep = '?';
  if (cluster.mode == cluster_mode::off) {
    out.append("?cluster=no");
    sep = '&';
  }
  if (cluster.sharded_pubsub != sharded_pubsub_mode::automatic) {
    out.push_back(sep);
    out.append(cluster.sharded_pubsub == sharded_pubsub_mode::on ? "sharded_pubsub=yes" : "sharded_pubsub=no");
  }
  return out;
}

}  // namespace redlease
