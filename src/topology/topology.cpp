// SPDX-License-Identifier: MIT
#include "topology/topology.hpp"

#include "net/subscriber.hpp"
#include "topology/node.hpp"

namespace redlease::detail {

keyed_request keyed_request::command(std::string_view key, std::string payload, reply_handler h, bool idempotent) {
  keyed_request r;
  r.key = key;
  r.payload = std::move(payload);
  r.handler = std::move(h);
  r.idempotent = idempotent;
  return r;
}

keyed_request keyed_request::script_call(std::string_view key, const lua_script& s, arg_list a, reply_handler h,
                                         bool idempotent) {
  keyed_request r;
  r.key = key;
  r.what = kind::script;
  r.script = &s;
  r.args = std::move(a);
  r.handler = std::move(h);
  r.idempotent = idempotent;
  return r;
}

void topology::exec(keyed_request r) {
  node& n = route(r.key);
  switch (r.what) {
    case keyed_request::kind::command:
      return n.exec(std::move(r.payload), std::move(r.handler), r.idempotent);
    case keyed_request::kind::script:
      return n.exec_script(*r.script, std::move(r.args), std::move(r.handler), r.idempotent, r.always_eval);
    case keyed_request::kind::script_acked:
      return n.exec_script_acked(*r.script, std::move(r.args), std::move(r.handler), r.idempotent, r.always_eval);
  }
}

subscriber* topology::subscribe(const std::string& channel, channel_listener* l) {
  subscriber* s = &sub_for(channel);
  s->add(channel, l);
  return s;
}

void topology::unsubscribe(subscriber* s, const std::string& channel, channel_listener* l) {
  if (s != nullptr) s->remove(channel, l);
}

std::unique_ptr<topology> make_topology(asio::any_io_executor ex, const config& cfg, io_guard* guard) {
  if (!cfg.sentinel.nodes.empty()) return make_sentinel(std::move(ex), cfg, guard);
  if (!cfg.unix_socket.empty() || cfg.cluster.mode == cluster_mode::off) return make_standalone(std::move(ex), cfg, guard);
  return make_cluster(std::move(ex), cfg, guard);
}

}  // namespace redlease::detail
