// SPDX-License-Identifier: MIT
#include "raw_client.hpp"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ostream>
#include <sstream>
#include <utility>

namespace redlease::test {
namespace {

std::string errno_text(int err) { return std::string(std::strerror(err)); }

void append_bulk(std::string& out, std::string_view arg) {
  out += '$';
  out += std::to_string(arg.size());
  out += "\r\n";
  out.append(arg.data(), arg.size());
  out += "\r\n";
}

template <typename Args>
void encode_command(std::string& out, const Args& args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const auto& a : args) append_bulk(out, std::string_view(a));
}

raw_reply convert(const redisReply* r) {
  raw_reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = raw_reply::kind::string;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = raw_reply::kind::status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = raw_reply::kind::error;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = raw_reply::kind::integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = raw_reply::kind::array;
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default: out.type = raw_reply::kind::nil; break;
  }
  return out;
}

void render(std::ostream& os, const raw_reply& r) {
  switch (r.type) {
    case raw_reply::kind::string: {
      os << '"';
      for (unsigned char c : r.str) {
        if (c == '"' || c == '\\') {
          os << '\\' << c;
        } else if (c < 0x20 || c >= 0x7f) {
          static constexpr char hex[] = "0123456789abcdef";
          os << "\\x" << hex[c >> 4] << hex[c & 0xf];
        } else {
          os << c;
        }
      }
      os << '"';
      break;
    }
    case raw_reply::kind::status: os << '+' << r.str; break;
    case raw_reply::kind::error: os << '-' << r.str; break;
    case raw_reply::kind::integer: os << "(integer) " << r.integer; break;
    case raw_reply::kind::nil: os << "(nil)"; break;
    case raw_reply::kind::array:
      os << '[';
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        if (i != 0) os << ", ";
        render(os, r.elements[i]);
      }
      os << ']';
      break;
  }
}

}  // namespace

std::string raw_reply::to_string() const {
  std::ostringstream os;
  render(os, *this);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const raw_reply& r) {
  render(os, r);
  return os;
}

void raw_client::reader_deleter::operator()(::redisReader* r) const noexcept { redisReaderFree(r); }

raw_client::raw_client(std::string host, std::uint16_t port, std::string password) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    throw std::runtime_error("raw_client: cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);

  int last_err = 0;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    // CLOEXEC: redis-server children forked by the harness must not inherit test connections, or
    // closing them here would not be seen by the server.
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    fd_ = fd;
    // On Linux SO_SNDTIMEO also bounds connect().
    apply_timeout();
    int rc;
    do {
      rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) break;
    last_err = errno;
    ::close(fd);
    fd_ = -1;
  }
  if (fd_ < 0) {
    throw std::runtime_error("raw_client: cannot connect to " + host + ":" + service + ": " +
                             errno_text(last_err));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  reader_.reset(redisReaderCreate());
  if (!reader_) {
    close();
    throw std::runtime_error("raw_client: redisReaderCreate failed");
  }

  if (!password.empty()) {
    raw_reply r = command({"AUTH", std::move(password)});
    if (r.is_error()) {
      close();
      throw std::runtime_error("raw_client: AUTH failed: " + r.str);
    }
  }
}

raw_client::~raw_client() { close(); }

raw_client::raw_client(raw_client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      reader_(std::move(other.reader_)),
      timeout_(other.timeout_) {}

raw_client& raw_client::operator=(raw_client&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    reader_ = std::move(other.reader_);
    timeout_ = other.timeout_;
  }
  return *this;
}

void raw_client::close() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void raw_client::set_timeout(std::chrono::milliseconds timeout) {
  timeout_ =
      timeout < std::chrono::milliseconds::zero() ? std::chrono::milliseconds::zero() : timeout;
  if (fd_ >= 0) apply_timeout();
}

void raw_client::apply_timeout() {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void raw_client::fail(const std::string& what) {
  close();
  throw std::runtime_error("raw_client: " + what);
}

void raw_client::send_all(std::string_view data) {
  if (fd_ < 0) throw std::runtime_error("raw_client: not connected");
  while (!data.empty()) {
    // MSG_NOSIGNAL: a server that went away must surface as an exception, not kill the test with
    // SIGPIPE.
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      // A partial write leaves the stream unusable, so the connection is closed either way.
      close();
      if (err == EAGAIN || err == EWOULDBLOCK) throw timeout_error("raw_client: send timed out");
      throw std::runtime_error("raw_client: send failed: " + errno_text(err));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

raw_reply raw_client::read_reply() {
  if (fd_ < 0) throw std::runtime_error("raw_client: not connected");
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_.get(), &reply) != REDIS_OK) {
      fail(std::string("protocol error: ") + reader_->errstr);
    }
    if (reply != nullptr) {
      std::unique_ptr<redisReply, decltype(&freeReplyObject)> guard(static_cast<redisReply*>(reply),
                                                                    &freeReplyObject);
      return convert(guard.get());
    }
    char buf[16 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      // The request stays pending: the caller may resume the server and read the reply later.
      if (err == EAGAIN || err == EWOULDBLOCK) throw timeout_error("raw_client: receive timed out");
      fail("receive failed: " + errno_text(err));
    }
    if (n == 0) fail("connection closed by the server");
    if (redisReaderFeed(reader_.get(), buf, static_cast<std::size_t>(n)) != REDIS_OK) {
      fail(std::string("protocol error: ") + reader_->errstr);
    }
  }
}

raw_reply raw_client::command(std::vector<std::string> args) {
  std::string out;
  encode_command(out, args);
  send_all(out);
  return read_reply();
}

raw_reply raw_client::operator()(std::initializer_list<std::string_view> args) {
  std::string out;
  encode_command(out, args);
  send_all(out);
  return read_reply();
}

std::vector<raw_reply> raw_client::pipeline(const std::vector<std::vector<std::string>>& cmds) {
  std::string out;
  for (const auto& c : cmds) encode_command(out, c);
  send_all(out);
  std::vector<raw_reply> replies;
  replies.reserve(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) replies.push_back(read_reply());
  return replies;
}

}  // namespace redlease::test
