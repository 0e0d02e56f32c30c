// SPDX-License-Identifier: MIT
// Unit tests of the RESP2 encoder and the incremental reply reader (src/net/resp.hpp).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "net/resp.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {
namespace {

using namespace std::string_literals;
using kind = reply::kind;

// ---- encoding ------------------------------------------------------------------------------------

TEST(RespEncode, Command) {
  std::string out;
  encode_command(out, {"SET", "key", "value"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
}

TEST(RespEncode, AppendsToExistingBuffer) {
  std::string out = "prefix";
  encode_command(out, {"PING"});
  encode_command(out, {"GET", "k"});
  EXPECT_EQ(out, "prefix*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

TEST(RespEncode, SpanForm) {
  std::vector<std::string_view> args{"HSET", "h", "f", "v"};
  std::string out;
  encode_command(out, std::span<const std::string_view>(args));
  EXPECT_EQ(out, "*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n");
}

TEST(RespEncode, BinarySafeArg) {
  std::string out;
  const std::string arg("a\0b\r\nc", 6);
  encode_arg(out, std::string_view(arg));
  EXPECT_EQ(out, "$6\r\na\0b\r\nc\r\n"s);
  EXPECT_EQ(out.size(), 1 + 1 + 2 + 6 + 2u);

  out.clear();
  encode_command(out, {"SET", std::string_view("\0", 1), std::string_view("x\0y", 3)});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\n\0\r\n$3\r\nx\0y\r\n"s);
}

TEST(RespEncode, EmptyArgAndHeader) {
  std::string out;
  encode_arg(out, std::string_view{});
  EXPECT_EQ(out, "$0\r\n\r\n");
  out.clear();
  encode_header(out, 0);
  EXPECT_EQ(out, "*0\r\n");
  out.clear();
  encode_header(out, 1234);
  EXPECT_EQ(out, "*1234\r\n");
}

TEST(RespEncode, IntegerArg) {
  std::string out;
  encode_arg(out, 0LL);
  encode_arg(out, 30000LL);
  encode_arg(out, -42LL);
  EXPECT_EQ(out, "$1\r\n0\r\n$5\r\n30000\r\n$3\r\n-42\r\n");
  out.clear();
  encode_arg(out, -9223372036854775807LL - 1);
  EXPECT_EQ(out, "$20\r\n-9223372036854775808\r\n");
}

TEST(RespEncode, LongArg) {
  std::string big(100000, 'z');
  std::string out;
  encode_arg(out, std::string_view(big));
  EXPECT_EQ(out, "$100000\r\n" + big + "\r\n");
}

// ---- decoding ------------------------------------------------------------------------------------

// Feeds `bytes` at once and expects exactly one complete reply.
reply decode_one(std::string_view bytes) {
  resp_reader rd;
  EXPECT_TRUE(rd.feed(bytes.data(), bytes.size()));
  reply r;
  EXPECT_EQ(rd.next(r), resp_reader::status::reply) << rd.error_text();
  reply extra;
  EXPECT_EQ(rd.next(extra), resp_reader::status::incomplete);
  return r;
}

TEST(RespDecode, Integers) {
  reply r = decode_one(":42\r\n");
  EXPECT_EQ(r.type, kind::integer);
  EXPECT_TRUE(r.is_integer());
  EXPECT_EQ(r.integer, 42);
  EXPECT_EQ(decode_one(":-7\r\n").integer, -7);
  EXPECT_EQ(decode_one(":0\r\n").integer, 0);
  EXPECT_EQ(decode_one(":9223372036854775807\r\n").integer, 9223372036854775807LL);
}

TEST(RespDecode, Nil) {
  reply r = decode_one("$-1\r\n");
  EXPECT_EQ(r.type, kind::nil);
  EXPECT_TRUE(r.is_nil());
  EXPECT_FALSE(r.is_string());
}

TEST(RespDecode, NilArray) {
  reply r = decode_one("*-1\r\n");
  EXPECT_TRUE(r.is_nil());
  EXPECT_TRUE(r.elements.empty());
}

TEST(RespDecode, Status) {
  reply r = decode_one("+OK\r\n");
  EXPECT_EQ(r.type, kind::status);
  EXPECT_TRUE(r.is_string());
  EXPECT_FALSE(r.is_error());
  EXPECT_EQ(r.str, "OK");
}

TEST(RespDecode, Error) {
  reply r = decode_one("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  EXPECT_EQ(r.type, kind::error);
  EXPECT_TRUE(r.is_error());
  EXPECT_FALSE(r.is_string());
  EXPECT_EQ(r.str, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

TEST(RespDecode, Bulk) {
  reply r = decode_one("$5\r\nhello\r\n");
  EXPECT_EQ(r.type, kind::string);
  EXPECT_TRUE(r.is_string());
  EXPECT_EQ(r.str, "hello");
}

TEST(RespDecode, BulkWithNulAndCrlf) {
  reply r = decode_one("$7\r\na\0b\r\n\0c\r\n"s);
  EXPECT_EQ(r.type, kind::string);
  EXPECT_EQ(r.str, "a\0b\r\n\0c"s);
  EXPECT_EQ(r.str.size(), 7u);
}

TEST(RespDecode, EmptyBulk) {
  reply r = decode_one("$0\r\n\r\n");
  EXPECT_EQ(r.type, kind::string);
  EXPECT_TRUE(r.str.empty());
}

TEST(RespDecode, EmptyArray) {
  reply r = decode_one("*0\r\n");
  EXPECT_EQ(r.type, kind::array);
  EXPECT_TRUE(r.elements.empty());
}

const std::string nested_bytes =
    "*4\r\n"
    ":1\r\n"
    "*3\r\n$3\r\nfoo\r\n$-1\r\n*2\r\n+inner\r\n-ERR deep\r\n"
    "*-1\r\n"
    "$3\r\nb\0r\r\n"s;

void check_nested(const reply& r) {
  ASSERT_EQ(r.type, kind::array);
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_EQ(r.elements[0].type, kind::integer);
  EXPECT_EQ(r.elements[0].integer, 1);
  const reply& mid = r.elements[1];
  ASSERT_EQ(mid.type, kind::array);
  ASSERT_EQ(mid.elements.size(), 3u);
  EXPECT_EQ(mid.elements[0].type, kind::string);
  EXPECT_EQ(mid.elements[0].str, "foo");
  EXPECT_TRUE(mid.elements[1].is_nil());
  const reply& deep = mid.elements[2];
  ASSERT_EQ(deep.type, kind::array);
  ASSERT_EQ(deep.elements.size(), 2u);
  EXPECT_EQ(deep.elements[0].type, kind::status);
  EXPECT_EQ(deep.elements[0].str, "inner");
  EXPECT_EQ(deep.elements[1].type, kind::error);
  EXPECT_EQ(deep.elements[1].str, "ERR deep");
  EXPECT_TRUE(r.elements[2].is_nil());
  EXPECT_EQ(r.elements[3].type, kind::string);
  EXPECT_EQ(r.elements[3].str, "b\0r"s);
}

TEST(RespDecode, NestedArrays) { check_nested(decode_one(nested_bytes)); }

TEST(RespDecode, ByteByByte) {
  resp_reader rd;
  reply r;
  for (std::size_t i = 0; i < nested_bytes.size(); ++i) {
    ASSERT_EQ(rd.next(r), resp_reader::status::incomplete) << "at byte " << i;
    ASSERT_TRUE(rd.feed(&nested_bytes[i], 1));
  }
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  check_nested(r);
  EXPECT_EQ(rd.next(r), resp_reader::status::incomplete);
}

// Several replies in one stream, cut into chunks of every size from 1 to the whole stream.
TEST(RespDecode, ArbitraryChunkBoundaries) {
  // "+a\rb": a CR inside a line, then the line end, wherever the cuts fall (a line that arrives in
  // pieces is searched from where the last search stopped).
  const std::string stream =
      ":5\r\n"s + nested_bytes + "$-1\r\n+PONG\r\n$4\r\n\0\0\0\0\r\n-ERR x\r\n*0\r\n+a\rb\r\n"s;
  for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    resp_reader rd;
    std::vector<reply> got;
    for (std::size_t off = 0; off < stream.size(); off += chunk) {
      auto n = std::min(chunk, stream.size() - off);
      ASSERT_TRUE(rd.feed(stream.data() + off, n));
      for (;;) {
        reply r;
        auto st = rd.next(r);
        ASSERT_NE(st, resp_reader::status::error) << rd.error_text();
        if (st == resp_reader::status::incomplete) break;
        got.push_back(std::move(r));
      }
    }
    ASSERT_EQ(got.size(), 8u);
    EXPECT_EQ(got[0].integer, 5);
    check_nested(got[1]);
    EXPECT_TRUE(got[2].is_nil());
    EXPECT_EQ(got[3].type, kind::status);
    EXPECT_EQ(got[3].str, "PONG");
    EXPECT_EQ(got[4].type, kind::string);
    EXPECT_EQ(got[4].str, std::string(4, '\0'));
    EXPECT_EQ(got[5].type, kind::error);
    EXPECT_EQ(got[5].str, "ERR x");
    EXPECT_EQ(got[6].type, kind::array);
    EXPECT_TRUE(got[6].elements.empty());
    EXPECT_EQ(got[7].str, "a\rb");
  }
}

TEST(RespDecode, SeveralRepliesInOneFeed) {
  resp_reader rd;
  const std::string bytes = "+OK\r\n:1\r\n:2\r\n$1\r\nx\r\n*1\r\n:3\r\n";
  ASSERT_TRUE(rd.feed(bytes.data(), bytes.size()));
  reply r;
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.str, "OK");
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.integer, 1);
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.integer, 2);
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.str, "x");
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0].integer, 3);
  EXPECT_EQ(rd.next(r), resp_reader::status::incomplete);
}

TEST(RespDecode, ReusedOutputIsOverwritten) {
  resp_reader rd;
  const std::string bytes = "*2\r\n:1\r\n:2\r\n$-1\r\n";
  ASSERT_TRUE(rd.feed(bytes.data(), bytes.size()));
  reply r;
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.elements.size(), 2u);
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_TRUE(r.is_nil());
  EXPECT_TRUE(r.elements.empty());
}

TEST(RespDecode, ProtocolError) {
  resp_reader rd;
  const std::string bytes = "?x\r\n";
  bool fed = rd.feed(bytes.data(), bytes.size());
  reply r;
  if (fed) {
    EXPECT_EQ(rd.next(r), resp_reader::status::error);
  }
  EXPECT_FALSE(rd.error_text().empty());
}

TEST(RespDecode, ProtocolErrorAfterGoodReply) {
  resp_reader rd;
  const std::string bytes = ":1\r\n!garbage\r\n";
  ASSERT_TRUE(rd.feed(bytes.data(), bytes.size()));
  reply r;
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.integer, 1);
  EXPECT_EQ(rd.next(r), resp_reader::status::error);
  EXPECT_FALSE(rd.error_text().empty());
}

TEST(RespDecode, ResetClearsStateAndError) {
  resp_reader rd;
  const std::string bad = "?x\r\n";
  (void)rd.feed(bad.data(), bad.size());
  reply r;
  (void)rd.next(r);
  rd.reset();
  const std::string good = ":9\r\n";
  ASSERT_TRUE(rd.feed(good.data(), good.size()));
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.integer, 9);

  // A partial reply is dropped by reset.
  const std::string partial = "$10\r\nabc";
  ASSERT_TRUE(rd.feed(partial.data(), partial.size()));
  EXPECT_EQ(rd.next(r), resp_reader::status::incomplete);
  rd.reset();
  const std::string next = "+OK\r\n";
  ASSERT_TRUE(rd.feed(next.data(), next.size()));
  ASSERT_EQ(rd.next(r), resp_reader::status::reply);
  EXPECT_EQ(r.str, "OK");
}

TEST(RespRoundTrip, EncodedCommandDecodesAsArrayOfBulks) {
  // A command is an array of bulk strings: the reader decodes it back (binary-safe).
  std::string out;
  const std::string bin("\0\r\n\xff", 4);
  encode_command(out, {"EVALSHA", "abc", std::string_view(bin), ""});
  reply r = decode_one(out);
  ASSERT_EQ(r.type, kind::array);
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_EQ(r.elements[0].str, "EVALSHA");
  EXPECT_EQ(r.elements[1].str, "abc");
  EXPECT_EQ(r.elements[2].str, bin);
  EXPECT_EQ(r.elements[3].str, "");
  for (auto& e : r.elements) EXPECT_EQ(e.type, kind::string);
}


// ---- bounds: memory follows the bytes received ----------------------------------------------------

TEST(RespBounds, DeclaredLengthsAreNotAllocations) {
  resp_reader rd;
  const std::string hdr = "*4000000\r\n:1\r\n";  // within the element bound, but only one element sent
  ASSERT_TRUE(rd.feed(hdr.data(), hdr.size()));
  reply r;
  EXPECT_EQ(rd.next(r), resp_reader::status::incomplete);
  EXPECT_LT(rd.buffered(), 64u);
  const std::string bulk = "$400000000\r\nabc";  // 400 MB declared, 3 bytes sent
  resp_reader rb;
  ASSERT_TRUE(rb.feed(bulk.data(), bulk.size()));
  EXPECT_EQ(rb.next(r), resp_reader::status::incomplete);
  EXPECT_LT(rb.buffered(), 64u);
}

TEST(RespBounds, OverTheBoundsIsAnErrorAtOnce) {
  resp_limits lim;
  lim.max_depth = 4;
  lim.max_elements = 10;
  lim.max_bulk = 100;
  auto fails = [&](const std::string& bytes) {
    resp_reader rd(lim);
    if (!rd.feed(bytes.data(), bytes.size())) return true;
    reply r;
    auto st = rd.next(r);
    return st == resp_reader::status::error && !rd.error_text().empty();
  };
  EXPECT_TRUE(fails("*11\r\n"));                          // declared more than the element bound
  EXPECT_TRUE(fails("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"));  // nested deeper than 4
  EXPECT_TRUE(fails("$101\r\n"));                         // a bulk over the limit
  EXPECT_TRUE(fails("$-2\r\n"));
  EXPECT_TRUE(fails(":12x\r\n"));
  EXPECT_TRUE(fails("H"));                                 // not a type byte: no need to wait for a line
  EXPECT_TRUE(fails(std::string("\x15\x03\x03", 3)));    // a TLS record
  EXPECT_FALSE(fails("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"));  // depth 4 is fine
  EXPECT_FALSE(fails("*9\r\n"));                          // incomplete, not an error
}

TEST(RespBounds, ErrorTextShowsThePeersFirstBytesEscaped) {
  resp_reader rd;
  const std::string http = "HTTP/1.1 400 Bad Request\r\n\r\n";
  ASSERT_TRUE(rd.feed(http.data(), http.size()));
  reply r;
  ASSERT_EQ(rd.next(r), resp_reader::status::error);
  EXPECT_NE(rd.error_text().find("\"HTTP/1.1 400 Bad Request\\r\\n\\r\\n\""), std::string::npos) << rd.error_text();
  EXPECT_FALSE(rd.feed(":1\r\n", 4)) << "a broken stream stays broken until reset";
  rd.reset();
  ASSERT_TRUE(rd.feed(":1\r\n", 4));
  EXPECT_EQ(rd.next(r), resp_reader::status::reply);
}

}  // namespace
}  // namespace redlease::detail
