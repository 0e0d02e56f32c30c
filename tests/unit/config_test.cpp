// SPDX-License-Identifier: MIT
// Unit tests of config::from_url and config::redacted_url.
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "redlease/client.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"

namespace redlease {
namespace {

// Expects both forms of from_url to reject `url` with `want`.
void expect_rejected(std::string_view url, errc want) {
  SCOPED_TRACE(std::string(url));
  std::error_code ec;
  config c = config::from_url(url, ec);
  EXPECT_EQ(ec, make_error_code(want));
  // A failed parse returns a default config.
  EXPECT_EQ(c.host, config{}.host);
  EXPECT_EQ(c.port, config{}.port);
  EXPECT_TRUE(c.password.empty());
  EXPECT_TRUE(c.unix_socket.empty());
  try {
    (void)config::from_url(url);
    ADD_FAILURE() << "from_url did not throw";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), make_error_code(want));
    EXPECT_NE(std::string(e.what()).find(make_error_code(want).message()), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "from_url threw a foreign exception: " << e.what();
  }
}

config parse_ok(std::string_view url) {
  std::error_code ec;
  config c = config::from_url(url, ec);
  EXPECT_FALSE(ec) << url << ": " << ec.message();
  config thrown;
  EXPECT_NO_THROW(thrown = config::from_url(url)) << url;
  EXPECT_EQ(thrown.host, c.host);
  EXPECT_EQ(thrown.port, c.port);
  EXPECT_EQ(thrown.database, c.database);
  EXPECT_EQ(thrown.username, c.username);
  EXPECT_EQ(thrown.password, c.password);
  EXPECT_EQ(thrown.unix_socket, c.unix_socket);
  return c;
}

TEST(ConfigFromUrl, HostPortDb) {
  config c = parse_ok("redis://example.com:6380/5");
  EXPECT_EQ(c.host, "example.com");
  EXPECT_EQ(c.port, 6380);
  EXPECT_EQ(c.database, 5);
  EXPECT_TRUE(c.username.empty());
  EXPECT_TRUE(c.password.empty());
  EXPECT_TRUE(c.unix_socket.empty());
}

TEST(ConfigFromUrl, DefaultPortAndDb) {
  config c = parse_ok("redis://localhost");
  EXPECT_EQ(c.host, "localhost");
  EXPECT_EQ(c.port, 6379);
  EXPECT_EQ(c.database, 0);

  c = parse_ok("redis://10.1.2.3/");
  EXPECT_EQ(c.host, "10.1.2.3");
  EXPECT_EQ(c.port, 6379);
  EXPECT_EQ(c.database, 0);

  c = parse_ok("redis://h:1/0");
  EXPECT_EQ(c.port, 1);
  EXPECT_EQ(c.database, 0);

  c = parse_ok("redis://h:65535/15");
  EXPECT_EQ(c.port, 65535);
  EXPECT_EQ(c.database, 15);
}

TEST(ConfigFromUrl, TimingFieldsKeepDefaults) {
  config c = parse_ok("redis://h:1234/2");
  config d;
  EXPECT_EQ(c.connect_timeout, d.connect_timeout);
  EXPECT_EQ(c.request_timeout, d.request_timeout);
  EXPECT_EQ(c.reconnect_min_delay, d.reconnect_min_delay);
  EXPECT_EQ(c.reconnect_max_delay, d.reconnect_max_delay);
  EXPECT_EQ(c.watchdog_timeout, d.watchdog_timeout);
  EXPECT_EQ(c.client_name, d.client_name);
}

TEST(ConfigFromUrl, UserAndPassword) {
  config c = parse_ok("redis://alice:s3cret@db.local:7000/2");
  EXPECT_EQ(c.username, "alice");
  EXPECT_EQ(c.password, "s3cret");
  EXPECT_EQ(c.host, "db.local");
  EXPECT_EQ(c.port, 7000);
  EXPECT_EQ(c.database, 2);
}

TEST(ConfigFromUrl, PasswordOnly) {
  config c = parse_ok("redis://:s3cret@h:7000");
  EXPECT_TRUE(c.username.empty());
  EXPECT_EQ(c.password, "s3cret");
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 7000);
}

// A user part without a colon is the ACL user's name (Redis 6+), as redis-py and node-redis read
// it; before, `app` became the password, and `redlease` with $REDLEASE_PASSWORD authenticated as
// `default` with the environment's password instead of as `app`.
TEST(ConfigFromUrl, AUserPartWithoutAColonIsTheUserName) {
  config c = parse_ok("redis://app@h");
  EXPECT_EQ(c.username, "app");
  EXPECT_TRUE(c.password.empty());
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 6379);
  c = parse_ok("rediss://us%40er@h:7000/2");
  EXPECT_EQ(c.username, "us@er");
  EXPECT_TRUE(c.password.empty());
  EXPECT_EQ(c.database, 2);
  // A password alone needs its colon.
  c = parse_ok("redis://:s3cret@h");
  EXPECT_TRUE(c.username.empty());
  EXPECT_EQ(c.password, "s3cret");
}

TEST(ConfigFromUrl, PercentDecoding) {
  config c = parse_ok("redis://us%40er%3a1:p%3Ass%25w%2F%40rd%20x@h:1");
  EXPECT_EQ(c.username, "us@er:1");
  EXPECT_EQ(c.password, "p:ss%w/@rd x");
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 1);

  c = parse_ok("redis://:%41%62%00z@h");
  EXPECT_EQ(c.password, std::string("Ab\0z", 4));

  // A raw '@' in the password: userinfo is split at the last '@'.
  c = parse_ok("redis://u:p@ss@h:2");
  EXPECT_EQ(c.username, "u");
  EXPECT_EQ(c.password, "p@ss");
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 2);
}

TEST(ConfigFromUrl, Ipv6) {
  config c = parse_ok("redis://[::1]:6380/1");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 6380);
  EXPECT_EQ(c.database, 1);

  c = parse_ok("redis://u:p@[fe80::1:2]");
  EXPECT_EQ(c.host, "fe80::1:2");
  EXPECT_EQ(c.port, 6379);
  EXPECT_EQ(c.username, "u");
  EXPECT_EQ(c.password, "p");
}

TEST(ConfigFromUrl, UnixSocket) {
  config c = parse_ok("unix:///var/run/redis.sock");
  EXPECT_EQ(c.unix_socket, "/var/run/redis.sock");
  EXPECT_EQ(c.database, 0);

  c = parse_ok("unix:///tmp/r.sock?db=3");
  EXPECT_EQ(c.unix_socket, "/tmp/r.sock");
  EXPECT_EQ(c.database, 3);

  c = parse_ok("redis+unix:///tmp/r2.sock");
  EXPECT_EQ(c.unix_socket, "/tmp/r2.sock");
  EXPECT_EQ(c.database, 0);

  c = parse_ok("redis+unix:///tmp/r2.sock?db=12");
  EXPECT_EQ(c.unix_socket, "/tmp/r2.sock");
  EXPECT_EQ(c.database, 12);
}

TEST(ConfigFromUrl, DbAsQuery) {
  config c = parse_ok("redis://h:1/?db=4");
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 1);
  EXPECT_EQ(c.database, 4);
}

TEST(ConfigFromUrl, Rediss) {
  config c = parse_ok("rediss://h:6380");
  EXPECT_TRUE(c.tls.enabled);
  EXPECT_EQ(c.host, "h");
  EXPECT_EQ(c.port, 6380);
  c = parse_ok("rediss://u:p@h:6380/1");
  EXPECT_TRUE(c.tls.enabled);
  EXPECT_EQ(c.username, "u");
  EXPECT_EQ(c.password, "p");
  EXPECT_EQ(c.database, 1);
  c = parse_ok("rediss://[::1]");
  EXPECT_TRUE(c.tls.enabled);
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 6379);
  // The TLS file settings are not part of a URL: they keep their defaults.
  EXPECT_TRUE(c.tls.ca_file.empty());
  EXPECT_FALSE(c.tls.insecure);
  EXPECT_FALSE(parse_ok("redis://h:6380").tls.enabled);
  EXPECT_FALSE(parse_ok("unix:///tmp/r.sock").tls.enabled);
  // The same checks as redis:// apply.
  expect_rejected("rediss://", errc::invalid_url);
  expect_rejected("rediss://h:0", errc::invalid_url);
  expect_rejected("rediss://h/x", errc::invalid_url);
}

TEST(ConfigFromUrl, NoScheme) {
  expect_rejected("", errc::invalid_url);
  expect_rejected("localhost:6379", errc::invalid_url);
  expect_rejected("localhost", errc::invalid_url);
  expect_rejected("//localhost:6379", errc::invalid_url);
  expect_rejected("redis:/localhost", errc::invalid_url);
}

TEST(ConfigFromUrl, UnknownScheme) {
  expect_rejected("http://localhost:6379", errc::invalid_url);
  expect_rejected("REDIS://localhost", errc::invalid_url);
  expect_rejected("rediss+unix:///tmp/x", errc::invalid_url);
  expect_rejected("://localhost", errc::invalid_url);
}

TEST(ConfigFromUrl, EmptyHost) {
  expect_rejected("redis://", errc::invalid_url);
  expect_rejected("redis://:6379", errc::invalid_url);
  expect_rejected("redis:///3", errc::invalid_url);
  expect_rejected("redis://u:p@", errc::invalid_url);
  expect_rejected("redis://u:p@:6379", errc::invalid_url);
  expect_rejected("redis://[]:6379", errc::invalid_url);
}

TEST(ConfigFromUrl, BadPort) {
  expect_rejected("redis://h:0", errc::invalid_url);
  expect_rejected("redis://h:65536", errc::invalid_url);
  expect_rejected("redis://h:99999999999", errc::invalid_url);
  expect_rejected("redis://h:abc", errc::invalid_url);
  expect_rejected("redis://h:-1", errc::invalid_url);
  expect_rejected("redis://h:+1", errc::invalid_url);
  expect_rejected("redis://h:", errc::invalid_url);
  expect_rejected("redis://h:12ab", errc::invalid_url);
  expect_rejected("redis://[::1]:", errc::invalid_url);
  expect_rejected("redis://[::1]:0", errc::invalid_url);
  expect_rejected("redis://[::1]:x", errc::invalid_url);
}

TEST(ConfigFromUrl, BadDb) {
  expect_rejected("redis://h/abc", errc::invalid_url);
  expect_rejected("redis://h/-1", errc::invalid_url);
  expect_rejected("redis://h:1/1x", errc::invalid_url);
  expect_rejected("redis://h/99999999999999999999", errc::invalid_url);
  expect_rejected("redis://h?db=x", errc::invalid_url);
  expect_rejected("redis://h?foo=1", errc::invalid_url);
  expect_rejected("unix:///tmp/r.sock?db=", errc::invalid_url);
  expect_rejected("unix:///tmp/r.sock?db=-2", errc::invalid_url);
  expect_rejected("unix:///tmp/r.sock?db=1x", errc::invalid_url);
  expect_rejected("unix:///tmp/r.sock?timeout=3", errc::invalid_url);
}

TEST(ConfigFromUrl, BadPercentEscape) {
  expect_rejected("redis://u:p%zz@h", errc::invalid_url);
  expect_rejected("redis://u:p%4@h", errc::invalid_url);
  expect_rejected("redis://u:p%@h", errc::invalid_url);
  expect_rejected("redis://u%g1:p@h", errc::invalid_url);
  expect_rejected("redis://p%2@h", errc::invalid_url);
}

TEST(ConfigFromUrl, TrailingJunk) {
  expect_rejected("redis://h:6379/0/extra", errc::invalid_url);
  expect_rejected("redis://h:6379x", errc::invalid_url);
  expect_rejected("redis://h:6379 ", errc::invalid_url);
  expect_rejected("redis://h:6379/1 ", errc::invalid_url);
  expect_rejected("redis://h#frag", errc::invalid_url);
  expect_rejected("redis://ho st", errc::invalid_url);
  expect_rejected("redis://[::1]x", errc::invalid_url);
  expect_rejected("redis://[::1", errc::invalid_url);
}

TEST(ConfigFromUrl, BadUnixPath) {
  expect_rejected("unix://", errc::invalid_url);
  expect_rejected("unix://relative.sock", errc::invalid_url);
  expect_rejected("redis+unix://", errc::invalid_url);
  expect_rejected("unix://?db=1", errc::invalid_url);
}

TEST(ConfigRedactedUrl, NeverShowsThePassword) {
  const char* urls[] = {
      "redis://alice:topsecret@h:7000/2",
      "redis://:topsecret@h:7000",
      "redis://alice:topsecret@[::1]:7000/3",
      "redis://u:top%73ecret@h",
  };
  for (const char* url : urls) {
    SCOPED_TRACE(url);
    config c = parse_ok(url);
    EXPECT_EQ(c.password, "topsecret");
    std::string r = c.redacted_url();
    EXPECT_EQ(r.find("topsecret"), std::string::npos) << r;
    EXPECT_NE(r.find(c.host), std::string::npos) << r;
    EXPECT_NE(r.find(std::to_string(c.port)), std::string::npos) << r;
    EXPECT_EQ(r.rfind("redis://", 0), 0u) << r;
    if (!c.username.empty()) {
      EXPECT_NE(r.find(c.username), std::string::npos) << r;
    }
  }

  // Set by hand, also on a unix socket.
  config c;
  c.unix_socket = "/tmp/s.sock";
  c.password = "hunter2";
  c.database = 4;
  std::string r = c.redacted_url();
  EXPECT_EQ(r.find("hunter2"), std::string::npos) << r;
  EXPECT_NE(r.find("/tmp/s.sock"), std::string::npos) << r;
}

// The throwing form quotes the URL it rejects, so that the user sees which one, but never its user
// and password: a bad port or an unknown query key in a URL with credentials printed the password.
TEST(ConfigUrl, AnInvalidUrlIsQuotedWithoutItsCredentials) {
  const char* urls[] = {
      "redis://alice:hunter2@db.example:99999",
      "redis://:hunter2@db.example/abc",
      "redis-sentinel://:hunter2@db.example,s2",
      "redis://:hunter2@db.example?ssl=true",
      "redis://hunter2@db.example:0",
      "rediss://alice:hun@ter2@db.example:-1",
      // A mistyped or missing scheme: the part before the '@' is still a password.
      "alice:hunter2@db.example:6379",
      "redis:/alice:hunter2@db.example",
      "redis//:hunter2@db.example",
  };
  for (const char* url : urls) {
    SCOPED_TRACE(url);
    try {
      (void)config::from_url(url);
      ADD_FAILURE() << "from_url did not throw";
    } catch (const redlease::error& e) {
      std::string what = e.what();
      EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
      EXPECT_EQ(what.find("ter2"), std::string::npos) << what;
      EXPECT_EQ(what.find("alice"), std::string::npos) << what;
      EXPECT_NE(what.find("***@db.example"), std::string::npos) << what;
    }
  }
}

// What from_url says of a bad URL: what is wrong with it, in words, with the URL quoted (without its
// credentials) and no C++ name. Before, all of them said `config::from_url("..."): invalid Redis URL`.
TEST(ConfigUrl, AnInvalidUrlSaysWhatIsWrong) {
  const std::string schemes =
      "the schemes are redis://, rediss:// (TLS), redis-sentinel://, rediss-sentinel://, unix:// and redis+unix://";
  const std::pair<const char*, std::string> cases[] = {
      {"redsi://h:6379", "invalid Redis URL \"redsi://h:6379\": unknown scheme 'redsi' (" + schemes + ")"},
      {"http://localhost:6379", "invalid Redis URL \"http://localhost:6379\": unknown scheme 'http' (" + schemes + ")"},
      {"REDIS://h", "invalid Redis URL \"REDIS://h\": unknown scheme 'REDIS' (" + schemes + ", in lower case)"},
      {"redis:/h", "invalid Redis URL \"redis:/h\": 'redis:' must be followed by '//'"},
      {"/abc", "invalid Redis URL \"/abc\": no scheme (" + schemes + ")"},
      {"localhost:6379", "invalid Redis URL \"localhost:6379\": no scheme: for a host and port write "
                         "redis://localhost:6379"},
      {"redis://", "invalid Redis URL \"redis://\": missing host"},
      {"redis://:6379/2", "invalid Redis URL \"redis://:6379/2\": missing host"},
      {"redis://u:p@", "invalid Redis URL \"redis://***@\": missing host"},
      {"redis://h:0", "invalid Redis URL \"redis://h:0\": the port '0' is not a number from 1 to 65535"},
      {"redis://h/x", "invalid Redis URL \"redis://h/x\": the database 'x' is not a number from 0"},
      {"redis://h?ssl=true", "invalid Redis URL \"redis://h?ssl=true\": unknown query parameter 'ssl' (only db=N, "
                             "cluster=auto|yes|no and sharded_pubsub=auto|yes|no)"},
      {"unix:///r.sock?cluster=no", "invalid Redis URL \"unix:///r.sock?cluster=no\": unknown query parameter "
                                    "'cluster' (only db=N)"},
      {"redis-sentinel://s1,s2", "invalid Redis URL \"redis-sentinel://s1,s2\": missing ?master=NAME (the "
                                 "master's name the Sentinels know)"},
      {"unix://r.sock", "invalid Redis URL \"unix://r.sock\": the socket path must be absolute "
                        "(unix:///path/to/redis.sock)"},
      {"redis://u:p%zz@h", "invalid Redis URL \"redis://***@h\": bad %-escape in the user or password"},
  };
  for (const auto& [url, want] : cases) {
    SCOPED_TRACE(url);
    try {
      (void)config::from_url(url);
      ADD_FAILURE() << "from_url did not throw";
    } catch (const redlease::error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::invalid_url));
      EXPECT_EQ(std::string(e.what()), want);
    }
    // The error_code form says the same through last_error_text().
    std::error_code ec;
    (void)config::from_url(url, ec);
    EXPECT_EQ(ec, make_error_code(errc::invalid_url));
    EXPECT_EQ(last_error_text(), want.substr(want.find("\": ") + 3));
  }
}

// The client refuses a config whose timings or limits are no bound: a negative reconnect delay
// overflowed its doubling (UBSan: signed overflow), a zero one reconnected in a loop at full speed.
TEST(ConfigSettings, OutOfRangeTimingsAndLimitsAreNamed) {
  using namespace std::chrono_literals;
  EXPECT_EQ(config{}.invalid_setting(), "");
  config c;
  c.health_check_interval = 0ms;  // 0 turns the PING off
  c.sentinel.poll_interval = 0ms;
  EXPECT_EQ(c.invalid_setting(), "");
  // WAIT n 0 blocks until acknowledged: with a replica down the command connection stalled, and
  // every request behind it timed out.
  c.replica_ack.timeout = 0ms;
  EXPECT_EQ(c.invalid_setting(), "replica_ack.timeout must be at least 1 ms (it is 0 ms)");
  c.replica_ack.timeout = 1ms;
  EXPECT_EQ(c.invalid_setting(), "");
  c.reconnect_min_delay = -50ms;
  EXPECT_EQ(c.invalid_setting(), "reconnect_min_delay must be at least 1 ms (it is -50 ms)");
  c.reconnect_min_delay = 100ms;
  c.reconnect_max_delay = 50ms;
  EXPECT_EQ(c.invalid_setting(), "reconnect_max_delay must be at least 100 ms (it is 50 ms)");
  c = config{};
  c.request_timeout = 0ms;
  EXPECT_EQ(c.invalid_setting(), "request_timeout must be at least 1 ms (it is 0 ms)");
  c = config{};
  c.sentinel.timeout = 0ms;
  EXPECT_NE(c.invalid_setting().find("sentinel.timeout"), std::string::npos);
  c = config{};
  c.max_reply_elements = 0;
  EXPECT_EQ(c.invalid_setting(), "max_reply_elements must be at least 1");
  c = config{};
  c.watchdog_timeout = 2ms;  // stale before its grant arrived: lock() looped, or returned holding nothing
  EXPECT_EQ(c.invalid_setting(), "watchdog_timeout must be at least 100 ms (it is 2 ms)");
  c.watchdog_timeout = 100ms;
  EXPECT_EQ(c.invalid_setting(), "");
  // milliseconds::max() ("no timeout") overflowed the clock: every request timed out at once, the
  // client never connected, the watchdog looped grant and undo, the pub/sub PINGs ran flat out.
  const auto longest = std::chrono::milliseconds(1LL << 40);  // the longest lease or wait
  for (auto field : {&config::connect_timeout, &config::request_timeout, &config::reconnect_max_delay,
                     &config::health_check_interval, &config::watchdog_timeout, &config::queue_allowance}) {
    c = config{};
    c.*field = std::chrono::milliseconds::max();
    EXPECT_NE(c.invalid_setting().find("must be at most 1099511627776 ms"), std::string::npos) << c.invalid_setting();
    c.*field = longest;
    EXPECT_EQ(c.invalid_setting(), "");
  }
  c = config{};
  c.sentinel.timeout = std::chrono::milliseconds::max();
  EXPECT_NE(c.invalid_setting().find("sentinel.timeout must be at most"), std::string::npos);
  c = config{};
  c.replica_ack.timeout = longest + 1ms;
  EXPECT_NE(c.invalid_setting().find("replica_ack.timeout must be at most"), std::string::npos);
  c = config{};
  c.mutex_poll_cap = longest;  // a waiter polls up to ten times it apart
  EXPECT_NE(c.invalid_setting().find("mutex_poll_cap must be at most"), std::string::npos);
  // A reply nested a million deep was freed recursively: a stack overflow.
  c = config{};
  c.max_reply_depth = config::max_reply_depth_limit + 1;
  EXPECT_EQ(c.invalid_setting(), "max_reply_depth must be from 1 to 1024 (it is 1025)");
  c.max_reply_depth = config::max_reply_depth_limit;
  EXPECT_EQ(c.invalid_setting(), "");
  // The client says so at construction, with the setting's name.
  c = config{};
  c.reconnect_min_delay = 0ms;
  try {
    client cl(c);
    ADD_FAILURE() << "the client took reconnect_min_delay = 0";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::invalid_argument));
    EXPECT_NE(std::string(e.what()).find("reconnect_min_delay"), std::string::npos) << e.what();
  }
}

TEST(ConfigRedactedUrl, Shape) {
  EXPECT_EQ(config::from_url("redis://h:7000/2").redacted_url(), "redis://h:7000/2");
  EXPECT_EQ(config::from_url("redis://h").redacted_url(), "redis://h:6379");
  EXPECT_EQ(config::from_url("redis://[::1]:7000").redacted_url(), "redis://[::1]:7000");
  EXPECT_EQ(config::from_url("unix:///tmp/r.sock?db=3").redacted_url(), "unix:///tmp/r.sock?db=3");
  EXPECT_EQ(config::from_url("redis://alice:pw@h:9/1").redacted_url(), "redis://alice:***@h:9/1");
  EXPECT_EQ(config::from_url("redis://:pw@h:9").redacted_url(), "redis://:***@h:9");
  EXPECT_EQ(config::from_url("rediss://alice:pw@h:9/1").redacted_url(), "rediss://alice:***@h:9/1");
  EXPECT_EQ(config::from_url("rediss://h").redacted_url(), "rediss://h:6379");
}

// A user name with characters that delimit a URL ('@' ':' '/') or start an escape ('%') is
// percent-encoded, so the redacted URL still parses back to the same user, host and port.
TEST(ConfigRedactedUrl, UsernameIsPercentEncoded) {
  config c;
  // Moved in: g++ 12 -O2 warns (-Wrestrict, a false positive) on assigning these literals.
  c.host = std::string("h");
  c.port = 9;
  c.username = std::string("a@b:c/d%e f");
  c.password = std::string("pw");
  const std::string r = c.redacted_url();
  EXPECT_EQ(r, "redis://a%40b%3Ac%2Fd%25e%20f:***@h:9");
  config back = parse_ok(r);
  EXPECT_EQ(back.username, c.username);
  EXPECT_EQ(back.host, "h");
  EXPECT_EQ(back.port, 9);

  // Parsed from an encoded URL, shown encoded again; unreserved and sub-delim characters stay.
  EXPECT_EQ(config::from_url("redis://ops%40eu:pw@h:9").redacted_url(), "redis://ops%40eu:***@h:9");
  c.username = "Az09-._~!$&'()*+,;=";
  EXPECT_EQ(c.redacted_url(), "redis://Az09-._~!$&'()*+,;=:***@h:9");
  c.password.clear();
  c.username = "u@x";
  EXPECT_EQ(c.redacted_url(), "redis://u%40x@h:9");
}

TEST(config_url, sentinel_urls_list_the_sentinels_and_name_the_master) {
  auto c = parse_ok("redis-sentinel://app:s%40cret@10.0.0.1:26379,[::1]:26380,sentinel-c/2?master=my%20master");
  ASSERT_EQ(c.sentinel.nodes.size(), 3u);
  EXPECT_EQ(c.sentinel.nodes[0].host, "10.0.0.1");
  EXPECT_EQ(c.sentinel.nodes[0].port, 26379);
  EXPECT_EQ(c.sentinel.nodes[1].host, "::1");
  EXPECT_EQ(c.sentinel.nodes[1].port, 26380);
  EXPECT_EQ(c.sentinel.nodes[2].host, "sentinel-c");
  EXPECT_EQ(c.sentinel.nodes[2].port, 26379);  // Sentinel's default port
  EXPECT_EQ(c.sentinel.master_name, "my master");
  EXPECT_EQ(c.database, 2);
  // The URL's credentials are the data nodes'; the Sentinels' password is a field of its own.
  EXPECT_EQ(c.username, "app");
  EXPECT_EQ(c.password, "s@cret");
  EXPECT_TRUE(c.sentinel.password.empty());
  EXPECT_EQ(c.redacted_url(), "redis-sentinel://app:***@10.0.0.1:26379,[::1]:26380,sentinel-c:26379/2?master=my%20master");
  auto t = parse_ok("rediss-sentinel://s1:26380?master=m");
  EXPECT_TRUE(t.tls.enabled);
  EXPECT_TRUE(t.sentinel.tls.enabled);
  EXPECT_EQ(t.redacted_url(), "rediss-sentinel://s1:26380?master=m");
  auto d = parse_ok("redis-sentinel://127.0.0.1:31100?master=mymaster");
  EXPECT_FALSE(d.tls.enabled);
  ASSERT_EQ(d.sentinel.nodes.size(), 1u);
  EXPECT_EQ(d.sentinel.nodes[0].port, 31100);
  EXPECT_EQ(d.sentinel.master_name, "mymaster");
}

TEST(config_url, sentinel_urls_without_master_or_with_empty_hosts_are_rejected) {
  expect_rejected("redis-sentinel://127.0.0.1:26379", errc::invalid_url);
  expect_rejected("redis-sentinel://127.0.0.1:26379?master=", errc::invalid_url);
  expect_rejected("redis-sentinel://a,,b?master=m", errc::invalid_url);
  expect_rejected("redis-sentinel://a:0?master=m", errc::invalid_url);
  expect_rejected("redis://a?master=m", errc::invalid_url);  // master= means nothing without Sentinels
}

// Expects both forms of from_url to reject `url`, saying each of `words`.
void expect_rejected_saying(std::string_view url, std::initializer_list<std::string_view> words) {
  expect_rejected(url, errc::invalid_url);
  std::error_code ec;
  (void)config::from_url(url, ec);
  const std::string why = last_error_text();
  for (auto word : words) EXPECT_NE(why.find(word), std::string::npos) << url << ": " << why;
}

using host_list = std::vector<std::pair<std::string, int>>;

// The hosts `c` names: host/port first, then the cluster seeds.
host_list hosts_of(const config& c) {
  host_list out{{c.host, c.port}};
  for (const auto& seed : c.cluster.seeds) out.emplace_back(seed.host, seed.port);
  return out;
}

TEST(config_url, several_hosts_are_the_first_host_and_the_cluster_seeds) {
  auto c = parse_ok("redis://u:pw@h1:7000,h2:7001,h3");
  // h3 has Redis's default port, not host_port's (Sentinel's).
  EXPECT_EQ(hosts_of(c), (host_list{{"h1", 7000}, {"h2", 7001}, {"h3", 6379}}));
  EXPECT_EQ(c.username, "u");
  EXPECT_EQ(c.password, "pw");
  EXPECT_EQ(c.cluster.mode, cluster_mode::automatic);
  EXPECT_EQ(c.cluster.sharded_pubsub, sharded_pubsub_mode::automatic);

  EXPECT_EQ(hosts_of(parse_ok("redis://h1,h2:7001")), (host_list{{"h1", 6379}, {"h2", 7001}}));

  c = parse_ok("rediss://[::1]:7000,[fe80::1:2]:7001,[::1]");
  EXPECT_TRUE(c.tls.enabled);
  EXPECT_EQ(hosts_of(c), (host_list{{"::1", 7000}, {"fe80::1:2", 7001}, {"::1", 6379}}));

  // Database 0 is a cluster's only one, stated or not.
  EXPECT_EQ(parse_ok("redis://h1,h2/0").database, 0);
  EXPECT_EQ(parse_ok("redis://h1,h2/?db=0").cluster.seeds.size(), 1u);
  // One host: no seeds, any database.
  c = parse_ok("redis://h1:7000/3");
  EXPECT_TRUE(c.cluster.seeds.empty());
  EXPECT_EQ(c.database, 3);
}

TEST(config_url, cluster_and_sharded_pubsub_query_parameters) {
  EXPECT_EQ(parse_ok("redis://h?cluster=no").cluster.mode, cluster_mode::off);
  EXPECT_EQ(parse_ok("redis://h?cluster=yes").cluster.mode, cluster_mode::automatic);
  EXPECT_EQ(parse_ok("redis://h?cluster=auto").cluster.mode, cluster_mode::automatic);
  EXPECT_EQ(parse_ok("redis://h?sharded_pubsub=yes").cluster.sharded_pubsub, sharded_pubsub_mode::on);
  EXPECT_EQ(parse_ok("redis://h?sharded_pubsub=no").cluster.sharded_pubsub, sharded_pubsub_mode::off);
  EXPECT_EQ(parse_ok("redis://h?sharded_pubsub=auto").cluster.sharded_pubsub, sharded_pubsub_mode::automatic);

  auto c = parse_ok("rediss://h:7000/?cluster=no&sharded_pubsub=no&db=3");
  EXPECT_EQ(c.cluster.mode, cluster_mode::off);
  EXPECT_EQ(c.cluster.sharded_pubsub, sharded_pubsub_mode::off);
  EXPECT_EQ(c.database, 3);
  c = parse_ok("redis://h1,h2:7001?sharded_pubsub=yes&cluster=yes");
  EXPECT_EQ(c.cluster.mode, cluster_mode::automatic);
  EXPECT_EQ(c.cluster.sharded_pubsub, sharded_pubsub_mode::on);
  EXPECT_EQ(c.cluster.seeds.size(), 1u);
}

TEST(config_url, bad_host_lists_and_cluster_parameters_say_what_is_wrong) {
  expect_rejected_saying("redis://h1,,h2", {"empty host", "list"});
  expect_rejected_saying("redis://h1,h2,", {"empty host", "list"});
  expect_rejected_saying("redis://,h1", {"empty host", "list"});
  expect_rejected_saying("redis://h1,/0", {"empty host"});
  expect_rejected_saying("redis://h1,h2:0", {"the port '0'"});
  expect_rejected_saying("redis://h1,[::1", {"']'"});
  expect_rejected_saying("redis://h1,h2/1", {"database 1", "only database 0"});
  expect_rejected_saying("redis://h1,h2?db=2", {"database 2", "only database 0"});
  expect_rejected_saying("redis://h1,h2?cluster=no", {"cluster=no takes one host"});
  expect_rejected_saying("redis://h1,h2/0?cluster=no", {"cluster=no takes one host"});
  expect_rejected_saying("redis://h?cluster=maybe", {"cluster='maybe'", "auto, yes or no"});
  expect_rejected_saying("redis://h?cluster=", {"cluster=''", "auto, yes or no"});
  expect_rejected_saying("redis://h?sharded_pubsub=on", {"sharded_pubsub='on'", "auto, yes or no"});
  expect_rejected_saying("redis://h?cluster=NO", {"cluster='NO'"});
  expect_rejected_saying("redis://h?clusters=no", {"unknown query parameter 'clusters'", "cluster=auto|yes|no"});
  // The cluster parameters belong to redis:// and rediss:// only.
  expect_rejected_saying("redis-sentinel://s1?master=m&cluster=no", {"unknown query parameter 'cluster'"});
  expect_rejected_saying("unix:///tmp/r.sock?sharded_pubsub=yes", {"unknown query parameter 'sharded_pubsub'"});
  // The password of a rejected host list is not quoted.
  try {
    (void)config::from_url("redis://u:hunter2@h1,,h2");
    ADD_FAILURE() << "from_url did not throw";
  } catch (const redlease::error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(ConfigRedactedUrl, SeedsAndClusterParametersRoundTrip) {
  EXPECT_EQ(config::from_url("redis://u:pw@h1,[::1]:7001,h3:7002").redacted_url(),
            "redis://u:***@h1:6379,[::1]:7001,h3:7002");
  EXPECT_EQ(config::from_url("redis://h?cluster=no&sharded_pubsub=yes").redacted_url(),
            "redis://h:6379?cluster=no&sharded_pubsub=yes");
  EXPECT_EQ(config::from_url("redis://h/2?cluster=no").redacted_url(), "redis://h:6379/2?cluster=no");
  EXPECT_EQ(config::from_url("rediss://h1,h2?sharded_pubsub=no").redacted_url(),
            "rediss://h1:6379,h2:6379?sharded_pubsub=no");
  EXPECT_EQ(config::from_url("redis://h?cluster=yes&sharded_pubsub=auto").redacted_url(), "redis://h:6379");

  const char* urls[] = {
      "redis://h1:7000,h2:7001,[::1]:7002",
      "rediss://:topsecret@[fe80::1]:7000,h2?sharded_pubsub=yes",
      "redis://alice:topsecret@h:9/3?cluster=no&sharded_pubsub=no",
      "redis://h1,h2/0?sharded_pubsub=no&cluster=auto",
      "redis://h",
  };
  for (const char* url : urls) {
    SCOPED_TRACE(url);
    const config c = parse_ok(url);
    const std::string r = c.redacted_url();
    EXPECT_EQ(r.find("topsecret"), std::string::npos) << r;
    const config back = parse_ok(r);
    EXPECT_EQ(back.database, c.database);
    EXPECT_EQ(back.tls.enabled, c.tls.enabled);
    EXPECT_EQ(back.cluster.mode, c.cluster.mode);
    EXPECT_EQ(back.cluster.sharded_pubsub, c.cluster.sharded_pubsub);
    EXPECT_EQ(hosts_of(back), hosts_of(c));
  }

  // Set by hand: the seeds' password-free form too, and no cluster parameters for Sentinels.
  config c;
  c.password = "hunter2";
  c.cluster.seeds.push_back(host_port{std::string("s1"), 7001});
  c.cluster.sharded_pubsub = sharded_pubsub_mode::on;
  EXPECT_EQ(c.redacted_url(), "redis://:***@127.0.0.1:6379,s1:7001?sharded_pubsub=yes");
  c.sentinel.nodes.push_back(host_port{std::string("s"), 26379});
  c.sentinel.master_name = std::string("m");
  EXPECT_EQ(c.redacted_url(), "redis-sentinel://:***@s:26379?master=m");
}

TEST(ConfigSettings, ClusterTimingsAndSeedsAreChecked) {
  using namespace std::chrono_literals;
  config c;
  c.cluster.refresh_interval = 0ms;
  EXPECT_EQ(c.invalid_setting(), "cluster.refresh_interval must be at least 1 ms (it is 0 ms)");
  c.cluster.refresh_interval = std::chrono::milliseconds::max();
  EXPECT_NE(c.invalid_setting().find("cluster.refresh_interval must be at most"), std::string::npos);
  c.cluster.refresh_interval = 1ms;
  EXPECT_EQ(c.invalid_setting(), "");
  c.cluster.probe_timeout = -1ms;
  EXPECT_EQ(c.invalid_setting(), "cluster.probe_timeout must be at least 1 ms (it is -1 ms)");
  c.cluster.probe_timeout = std::chrono::milliseconds(1LL << 40);
  EXPECT_EQ(c.invalid_setting(), "");
  c.cluster.probe_timeout += 1ms;
  EXPECT_NE(c.invalid_setting().find("cluster.probe_timeout must be at most"), std::string::npos);

  c = config{};
  c.cluster.seeds.push_back(host_port{std::string("h2"), 7001});
  c.cluster.seeds.push_back(host_port{std::string("h3"), 0});
  EXPECT_EQ(c.invalid_setting(), "cluster.seeds[1]: the port must be from 1 to 65535 (it is 0)");
  c.cluster.seeds[1].port = 7002;
  EXPECT_EQ(c.invalid_setting(), "");
  c.cluster.seeds[0].host.clear();
  EXPECT_EQ(c.invalid_setting(), "cluster.seeds[0]: the host must not be empty");
  // From a URL, always valid.
  EXPECT_EQ(config::from_url("redis://h1,h2,[::1]:7000").invalid_setting(), "");
}

}  // namespace
}  // namespace redlease
