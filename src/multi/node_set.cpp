// SPDX-License-Identifier: MIT
#include "multi/node_set.hpp"

#include <algorithm>
#include <utility>

#include "facade/client_impl.hpp"
#include "redlease/client.hpp"

namespace redlease::detail {

node_set::node_set(const std::vector<std::reference_wrapper<client>>& clients) {
  nodes_.reserve(clients.size());
  for (client& c : clients) {
    if (!c.impl()) throw error(errc::invalid_argument, "redlock: a moved-from client");
    nodes_.push_back(c.impl());
  }
}

node_set::node_set(std::vector<std::shared_ptr<client_impl>> clients) noexcept : nodes_(std::move(clients)) {}

node_set::~node_set() = default;
node_set::node_set(node_set&&) noexcept = default;

const asio::any_io_executor& node_set::home_executor() const noexcept { return nodes_.front()->executor(); }

const config& node_set::home_cfg() const noexcept { return nodes_.front()->cfg(); }

bool node_set::home_closed() const noexcept { return nodes_.front()->closed(); }

const config& node_set::cfg(std::size_t i) const noexcept { return nodes_[i]->cfg(); }

bool node_set::closed(std::size_t i) const noexcept { return nodes_[i]->closed(); }

void node_set::run_or_fail(std::size_t i, unique_function<void(bool closed)> f) const {
  nodes_.at(i)->run_or_fail([f = std::move(f)](bool closed) mutable { f(closed); });
}

bool node_set::blocking_forbidden() const noexcept {
  return std::any_of(nodes_.begin(), nodes_.end(),
                     [](const auto& c) { return c->on_io_thread() || c->on_user_context(); });
}

bool node_set::post_home(std::function<void()> fn) const { return nodes_.front()->post(std::move(fn)); }

bool node_set::run_home_here(const std::function<void()>& fn) const {
  const auto& c = nodes_.front();
  if (c->on_io_thread()) return c->run(fn);
  return c->run_direct(fn);
}

bool node_set::exec_script(std::size_t i, std::string key, const lua_script& s, arg_list args, reply_handler h) const {
  const auto& c = nodes_.at(i);
  auto call = [c, key = std::move(key), s = &s, args = std::move(args), h = std::move(h)]() mutable {
    c->exec_script(key, *s, std::move(args), std::move(h));
  };
  // A thread's requests to one node keep their order: run inline there follows what it ran inline
  // before; run_direct drains the node's inbox (what this thread posted) first.
  if (c->on_io_thread()) return c->run(std::move(call));
  if (c->run_direct(call)) return true;
  return c->post(std::move(call));
}

void node_set::on_home_close(std::weak_ptr<void> alive, std::function<void()> fn) const {
  nodes_.front()->on_close(std::move(alive), std::move(fn));
}

}  // namespace redlease::detail
