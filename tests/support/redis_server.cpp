// SPDX-License-Identifier: MIT
#include "redis_server.hpp"

#include <cstdlib>
#include <string>

namespace redlease::test {
namespace {

// The binary the tests run: $REDLEASE_TEST_REDIS_SERVER, else "" (local::redis_server's default).
std::string test_binary() {
  const char* env = std::getenv("REDLEASE_TEST_REDIS_SERVER");
  return env != nullptr ? env : "";
}

}  // namespace

bool redis_server::available() { return local::redis_server::available(test_binary()); }

redis_server::redis_server(server_options opts) : local::redis_server(std::move(opts), test_binary()) {}

raw_client redis_server::client() const { return raw_client(host(), port(), password()); }

std::vector<std::unique_ptr<redis_server>> start_servers(int n, server_options opts) {
  std::vector<std::unique_ptr<redis_server>> servers;
  servers.reserve(static_cast<std::size_t>(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) servers.push_back(std::make_unique<redis_server>(opts));
  return servers;
}

}  // namespace redlease::test
