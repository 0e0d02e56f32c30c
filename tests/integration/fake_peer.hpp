// SPDX-License-Identifier: MIT
// A peer on 127.0.0.1 that is not Redis, for the untrusted-reply tests: each connection's n-th read
// is answered with `answers[n]` (the last one repeats), so a peer can pass the handshake and then
// misbehave, or misbehave at once. An answer that ends with `fake_peer::close` is sent without it,
// and the connection is closed. Loopback only; one thread; stops and joins in its destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redlease::test {

class fake_peer {
 public:
  explicit fake_peer(std::vector<std::string> answers) : answers_(std::move(answers)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0)
      throw std::runtime_error("fake_peer: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~fake_peer() {
    stop_ = true;
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(fd_);
  }
  fake_peer(const fake_peer&) = delete;
  fake_peer& operator=(const fake_peer&) = delete;

  /// The end of an answer after which the peer closes the connection.
  static constexpr std::string_view close = "<close>";

  std::uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

 private:
  struct conn {
    int fd;
    std::size_t reads = 0;
  };
  void loop() {
    char buf[65536];
    while (!stop_) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          conns_.push_back({c});
          ++accepted_;
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto& c = conns_[i - 1];
        auto n = ::read(c.fd, buf, sizeof buf);
        if (n <= 0) {
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        std::string_view a = answers_[std::min(c.reads++, answers_.size() - 1)];
        bool then_close = a.ends_with(close);
        if (then_close) a.remove_suffix(close.size());
        for (std::size_t off = 0; off < a.size();) {
          auto w = ::write(c.fd, a.data() + off, a.size() - off);
          if (w <= 0) break;
          off += static_cast<std::size_t>(w);
        }
        if (then_close) {
          ::close(c.fd);
          c.fd = -1;
        }
      }
      std::erase_if(conns_, [](const conn& c) { return c.fd < 0; });
    }
  }

  std::vector<std::string> answers_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<conn> conns_;
  std::thread thread_;
};

}  // namespace redlease::test
