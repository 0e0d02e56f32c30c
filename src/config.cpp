// SPDX-License-Identifier: MIT
#include "redlease/config.hpp"

#include <charconv>
#include <chrono>
#include <string>

#include "redlease/error.hpp"
#include "redlease/detail/limits.hpp"

namespace redlease {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

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

// Only `db=N` (and `master=NAME` where `master` is given) is understood; anything else is an error
// rather than silently ignored.
bool parse_query(std::string_view query, int& db, std::string* master = nullptr) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.substr(0, 3) == "db=") {
      if (!parse_int(item.substr(3), db) || db < 0) return false;
    } else if (master && item.substr(0, 7) == "master=") {
      if (!percent_decode(item.substr(7), *master) || master->empty()) return false;
    } else {
      return false;
    }
  }
  return true;
}

// `host[:port]` or `[v6]:port`; the port stays as given when absent.
bool parse_host_port(std::string_view hostport, std::string& host_out, std::uint16_t& port_out) {
  std::string_view host, port;
  if (!hostport.empty() && hostport.front() == '[') {  // [IPv6]:port
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return false;
    host = hostport.substr(1, close - 1);
    auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
      if (port.empty()) return false;
    }
  } else {
    auto colon = hostport.find(':');
    host = hostport.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) return false;
    }
  }
  if (host.empty()) return false;
  for (char ch : host)
    if (ch == ' ' || ch == '/' || ch == '@' || ch == '?' || ch == '#' || ch == ',') return false;
  host_out = std::string(host);
  if (!port.empty()) {
    unsigned p = 0;
    if (!parse_int(port, p) || p == 0 || p > 65535) return false;
    port_out = static_cast<std::uint16_t>(p);
  }
  return true;
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
  auto fail = [&](errc e) {
    ec = e;
    return config{};
  };
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return fail(errc::invalid_url);
  auto scheme = url.substr(0, scheme_end);
  auto rest = url.substr(scheme_end + 3);
  if (scheme == "unix" || scheme == "redis+unix") {
    auto q = rest.find('?');
    auto path = rest.substr(0, q);
    if (path.empty() || path.front() != '/') return fail(errc::invalid_url);
    if (q != std::string_view::npos && !parse_query(rest.substr(q + 1), c.database))
      return fail(errc::invalid_url);
    c.unix_socket = std::string(path);
    return c;
  }
  bool sentinel = scheme == "redis-sentinel" || scheme == "rediss-sentinel";
  if (scheme != "redis" && scheme != "rediss" && !sentinel) return fail(errc::invalid_url);
  c.tls.enabled = scheme == "rediss" || scheme == "rediss-sentinel";
  c.sentinel.tls.enabled = scheme == "rediss-sentinel";

  // userinfo is split at the last '@' so that a password may contain a (percent-encoded or raw) '@'.
  auto at = rest.rfind('@');
  if (at != std::string_view::npos) {
    auto userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // `redis://password@host` is accepted by redis-cli and most clients: a bare password.
      if (!percent_decode(userinfo, c.password)) return fail(errc::invalid_url);
    } else {
      if (!percent_decode(userinfo.substr(0, colon), c.username) ||
          !percent_decode(userinfo.substr(colon + 1), c.password))
        return fail(errc::invalid_url);
    }
  }
  auto slash = rest.find('/');
  auto hostport = rest.substr(0, slash);
  auto path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  if (auto q = path.find('?'); q != std::string_view::npos) {
    if (!parse_query(path.substr(q + 1), c.database, sentinel ? &c.sentinel.master_name : nullptr))
      return fail(errc::invalid_url);
    path = path.substr(0, q);
  }
  if (!path.empty() && (!parse_int(path, c.database) || c.database < 0)) return fail(errc::invalid_url);

  // A query may also follow the host list directly: `redis-sentinel://h1,h2?master=m`.
  if (auto q = hostport.find('?'); q != std::string_view::npos && slash == std::string_view::npos) {
    if (!parse_query(hostport.substr(q + 1), c.database, sentinel ? &c.sentinel.master_name : nullptr))
      return fail(errc::invalid_url);
    hostport = hostport.substr(0, q);
  }
  if (!sentinel) {
    if (!parse_host_port(hostport, c.host, c.port)) return fail(errc::invalid_url);
    return c;
  }
  // Sentinels: a comma-separated list; the master's name is required.
  while (true) {
    auto comma = hostport.find(',');
    host_port hp;
    if (!parse_host_port(hostport.substr(0, comma), hp.host, hp.port)) return fail(errc::invalid_url);
    c.sentinel.nodes.push_back(std::move(hp));
    if (comma == std::string_view::npos) break;
    hostport = hostport.substr(comma + 1);
  }
  if (c.sentinel.master_name.empty()) return fail(errc::invalid_url);
  return c;
}

config config::from_url(std::string_view url) {
  std::error_code ec;
  auto c = from_url(url, ec);
  if (!ec) return c;
  // The URL is quoted to say which one is wrong, but never its user and password: split where the
  // parser splits them, at the last '@' (a URL whose query holds an '@' loses more than it must).
  // Also when the scheme is mistyped or missing ("user:pw@host", "redis:/...", "redis//..."): what
  // comes before the '@' may be a password all the same.
  std::string shown(url.substr(0, 200));
  auto scheme_end = url.find("://");
  auto at = url.rfind('@');
  if (at != std::string_view::npos) {
    const bool schemed = scheme_end != std::string_view::npos && at > scheme_end;
    shown = (schemed ? std::string(url.substr(0, scheme_end + 3)) : std::string()) + "***@" +
            std::string(url.substr(at + 1, 200));
  }
  throw error(ec, "config::from_url(\"" + shown + "\")");
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
                 in_range("sentinel.timeout", sentinel.timeout, 1, longest),
                 in_range("sentinel.poll_interval", sentinel.poll_interval, 0, longest),
                 // WAIT's 0 is "block until acknowledged": the command connection would stall behind
                 // it for as long as a replica is down.
                 in_range("replica_ack.timeout", replica_ack.timeout, 1, longest)}) {
    if (!e.empty()) return e;
  }
  if (watchdog_batch_size < 1) return "watchdog_batch_size must be at least 1";
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
    if (h.find(':') != std::string::npos) {
      out.append("[").append(h).append("]");
    } else {
      out.append(h);
    }
    out.append(":").append(std::to_string(p));
  };
  if (sentinel.nodes.empty()) {
    append_host(host, port);
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
  }
  return out;
}

}  // namespace redlease
