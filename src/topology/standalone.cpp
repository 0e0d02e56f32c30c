// SPDX-License-Identifier: MIT
// One server: one command connection and one pub/sub connection, at the config's address.
#include "net/subscriber.hpp"
#include "topology/node.hpp"
#include "topology/topology.hpp"

namespace redlease::detail {
namespace {

class standalone final : public topology {
 public:
  standalone(asio::any_io_executor ex, const config& cfg, io_guard* guard)
      : node_(ex, cfg, "", guard), sub_(ex, cfg) {
    node_.conn().set_callbacks({[this] {
                                  node_.on_up();
                                  if (events_.on_up) events_.on_up();
                                },
                                {},
                                {},
                           {}});
  }
  void start() override { node_.conn().start(); }
  void close() override {
    sub_.close();
    node_.close();
  }
  subscriber& sub_for(std::string_view) override { return sub_; }
  void for_each_connection(const std::function<void(const connection&, bool)>& f) const override {
    f(*node_.conn_ptr(), false);
    f(sub_.conn(), true);
  }
  void for_each_node(const std::function<void(const node&)>& f) const override { f(node_); }

 protected:
  node& route(std::string_view) override { return node_; }

 private:
  node node_;
  subscriber sub_;
};

}  // namespace

std::unique_ptr<topology> make_standalone(asio::any_io_executor ex, const config& cfg, io_guard* guard) {
  return std::make_unique<standalone>(std::move(ex), cfg, guard);
}

}  // namespace redlease::detail
