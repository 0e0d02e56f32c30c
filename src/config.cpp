// SPDX-License-Identifier: MIT
#include "redlease/config.hpp"

#include <charconv>

#include "redlease/error.hpp"

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

bool parse_query_db(std::string_view query, int& db) {
  // Only `db=N` is understood; anything else is an error rather than silently ignored.
  while (!query.empty()) {
    auto amp = query.find('&');
    auto item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.substr(0, 3) != "db=" || !parse_int(item.substr(3), db) || db < 0) return false;
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
    if (q != std::string_view::npos && !parse_query_db(rest.substr(q + 1), c.database))
      return fail(errc::invalid_url);
    c.unix_socket = std::string(path);
    return c;
  }
  if (scheme == "rediss") c.tls.enabled = true;
  else if (scheme != "redis") return fail(errc::invalid_url);

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
    if (!parse_query_db(path.substr(q + 1), c.database)) return fail(errc::invalid_url);
    path = path.substr(0, q);
  }
  if (!path.empty() && (!parse_int(path, c.database) || c.database < 0)) return fail(errc::invalid_url);

  std::string_view host, port;
  if (!hostport.empty() && hostport.front() == '[') {  // [IPv6]:port
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return fail(errc::invalid_url);
    host = hostport.substr(1, close - 1);
    auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail(errc::invalid_url);
      port = after.substr(1);
      if (port.empty()) return fail(errc::invalid_url);
    }
  } else {
    auto colon = hostport.find(':');
    host = hostport.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) return fail(errc::invalid_url);
    }
  }
  if (host.empty()) return fail(errc::invalid_url);
  for (char ch : host)
    if (ch == ' ' || ch == '/' || ch == '@' || ch == '?' || ch == '#') return fail(errc::invalid_url);
  c.host = std::string(host);
  if (!port.empty()) {
    unsigned p = 0;
    if (!parse_int(port, p) || p == 0 || p > 65535) return fail(errc::invalid_url);
    c.port = static_cast<std::uint16_t>(p);
  }
  return c;
}

config config::from_url(std::string_view url) {
  std::error_code ec;
  auto c = from_url(url, ec);
  if (ec) throw error(ec, "config::from_url(\"" + std::string(url.substr(0, 200)) + "\")");
  return c;
}

std::string config::redacted_url() const {
  // Built with append() only: g++ 12 -O3 reports a false -Wrestrict on `"literal" + std::string`.
  std::string out;
  if (!unix_socket.empty()) {
    out.append("unix://").append(unix_socket);
    if (database) out.append("?db=").append(std::to_string(database));
    return out;
  }
  out.append(tls.enabled ? "rediss://" : "redis://");
  if (!username.empty()) {
    append_userinfo_encoded(out, username);
    out.append(password.empty() ? "@" : ":***@");
  } else if (!password.empty()) {
    out.append(":***@");
  }
  if (host.find(':') != std::string::npos) {
    out.append("[").append(host).append("]");
  } else {
    out.append(host);
  }
  out.append(":").append(std::to_string(port));
  if (database) out.append("/").append(std::to_string(database));
  return out;
}

}  // namespace redlease
