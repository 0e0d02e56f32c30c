// SPDX-License-Identifier: MIT
#include "redlock_nodes.hpp"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "commands.hpp"
#include "redlease/error.hpp"

namespace redlease::cli {

std::vector<std::string> redlock_urls(const std::vector<std::string>& given, std::string& problem) {
  std::vector<std::string> urls = given;
  std::string from = "--redis";
  if (urls.empty()) {
    from = "$REDLEASE_URL";
    const char* env = std::getenv("REDLEASE_URL");
    std::istringstream in(env != nullptr ? env : "");
    for (std::string u; in >> u;) urls.push_back(u);
  }
  if (urls.size() < redlock_min_nodes) {
    problem = "--redlock needs at least " + std::to_string(redlock_min_nodes) + " masters, one --redis URL each (or " +
              "their URLs in $REDLEASE_URL, separated by spaces); " + from + " gives " + std::to_string(urls.size());
    return {};
  }
  return urls;
}

std::vector<std::reference_wrapper<client>> redlock_nodes::refs() const {
  std::vector<std::reference_wrapper<client>> out;
  for (const auto& c : clients) out.emplace_back(*c);
  return out;
}

std::vector<node_ping> ping_nodes(const redlock_nodes& nodes, std::optional<std::chrono::milliseconds> grace) {
  struct shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<node_ping> pings;
    std::size_t answered = 0, failed = 0;
  };
  auto st = std::make_shared<shared>();
  st->pings.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes.clients[i]->async_command({"PING"}, [st, i, label = nodes.labels[i]](std::error_code ec, const reply&) {
      node_ping p;
      p.answered = !ec;
      p.ec = ec;
      if (ec) {
        // The words a blocking ping() would say (last_error_text() is set for this handler).
        try {
          throw_if(ec, ("client::ping " + label).c_str());
        } catch (const std::exception& e) {
          p.message = cli_words(e.what());
        }
      }
      std::lock_guard<std::mutex> g(st->mu);
      st->pings[i] = std::move(p);
      ++(ec ? st->failed : st->answered);
      st->cv.notify_all();
    });
  }
  const std::size_t n = nodes.size(), quorum = nodes.quorum();
  std::unique_lock<std::mutex> g(st->mu);
  st->cv.wait(g, [&] {
    return st->answered + st->failed == n || (grace && (st->answered >= quorum || n - st->failed < quorum));
  });
  if (grace && st->answered >= quorum) st->cv.wait_for(g, *grace, [&] { return st->answered + st->failed == n; });
  return st->pings;
}

void require_quorum(const redlock_nodes& nodes, const std::vector<node_ping>& pings, const std::string& what) {
  std::size_t answered = 0, failed = 0;
  std::error_code first;
  std::string failures;
  for (const auto& p : pings) {
    answered += p.answered;
    if (p.ec) {
      ++failed;
      if (!first) first = p.ec;
      failures += (failures.empty() ? "" : "; ") + p.message;
    }
  }
  if (answered >= nodes.quorum()) return;
  // ping_nodes() stops waiting once a quorum is out of reach: the others may not have answered yet.
  const std::size_t silent = failed > 0 ? failed : nodes.size() - answered;
  throw error(first ? first : std::error_code(errc::request_timeout),
              what + ": " + std::to_string(silent) + " of " + std::to_string(nodes.size()) +
                  " masters cannot be reached (RedLock needs " + std::to_string(nodes.quorum()) + ")" +
                  (failures.empty() ? "" : ": " + failures),
              error::whole_message);
}

}  // namespace redlease::cli
