// SPDX-License-Identifier: MIT
// A loopback TCP socket on a free port, for tests of unreachable servers: bound but not listening
// (connections are refused), or listening but never accepting (a silent server).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace redlease::test {

// A loopback TCP socket bound to a free port. With `listening` it accepts connections at the TCP
// level (the kernel completes the handshake into the backlog) but nobody ever calls accept().
class loopback_socket {
 public:
  explicit loopback_socket(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind() failed");
    socklen_t len = sizeof a;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("getsockname() failed");
    port_ = ntohs(a.sin_port);
    if (listening && ::listen(fd_, 16) != 0) throw std::runtime_error("listen() failed");
  }
  ~loopback_socket() { close(); }
  loopback_socket(const loopback_socket&) = delete;
  loopback_socket& operator=(const loopback_socket&) = delete;
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace redlease::test
