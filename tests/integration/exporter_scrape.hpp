// SPDX-License-Identifier: MIT
// Scraping `redlease exporter` in the tests (cli_exporter_test, cli_cluster_test): its /metrics page
// over a plain socket, and a sample's value read from Prometheus' text format.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

namespace redlease::test {

// The body of `GET /metrics` on 127.0.0.1:`port` ("" when it cannot be fetched).
inline std::string scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0 &&
      ::send(fd, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size())) {
    char chunk[8192];
    ssize_t n;
    while ((n = ::recv(fd, chunk, sizeof chunk, 0)) > 0) got.append(chunk, static_cast<std::size_t>(n));
  }
  if (fd >= 0) ::close(fd);
  const auto body = got.find("\r\n\r\n");
  return got.find(" 200 ") == std::string::npos || body == std::string::npos ? std::string() : got.substr(body + 4);
}

// The value of the sample `series` (name and labels, exactly as exposed), if the body has it.
inline std::optional<double> sample(const std::string& body, const std::string& series) {
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
  return std::nullopt;
}

}  // namespace redlease::test
