// SPDX-License-Identifier: MIT
#include "topology/cluster_map.hpp"

#include <charconv>

#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

bool starts_with_word(std::string_view text, std::string_view word) noexcept {
  return text.substr(0, word.size()) == word && (text.size() == word.size() || text[word.size()] == ' ');
}

std::optional<unsigned> parse_number(std::string_view s, unsigned max) noexcept {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

}  // namespace

// The builder is a friend of cluster_map: it fills the table while it reads the reply.
struct cluster_map_builder {
  static cluster_map_result build(const reply& r, std::string_view from_host);
};

cluster_map::cluster_map() : table_(cluster_slot_count, no_node) {}

const cluster_node* cluster_map::owner(std::uint16_t slot) const noexcept {
  if (slot >= cluster_slot_count || table_[slot] == no_node) return nullptr;
  return &nodes_[table_[slot]];
}

std::optional<std::size_t> cluster_map::find(const node_address& a) const noexcept {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].address == a) return i;
  }
  return std::nullopt;
}

std::size_t cluster_map::add(const node_address& a, std::string_view id) {
  if (auto i = find(a)) {
    if (nodes_[*i].id.empty()) nodes_[*i].id = id;
    return *i;
  }
  nodes_.push_back({a, std::string(id)});
  return nodes_.size() - 1;
}

bool cluster_map::patch(std::uint16_t slot, const node_address& a) {
  if (slot >= cluster_slot_count || a.port == 0) return false;
  if (!find(a) && nodes_.size() >= max_nodes) return false;
  const auto i = static_cast<std::uint16_t>(add(a, {}));
  if (table_[slot] == no_node) ++covered_;
  table_[slot] = i;
  return true;
}

cluster_map_result cluster_map_builder::build(const reply& r, std::string_view from_host) {
  cluster_map_result out;
  auto bad = [&out](std::string what) {
    out.ec = make_error_code(errc::bad_reply);
    out.text = "CLUSTER SLOTS: " + std::move(what);
    out.map = cluster_map{};
    return std::move(out);
  };
  if (r.is_error()) {
    out.ec = error_from_reply_text(r.str);
    out.text = r.str;
    return out;
  }
  if (!r.is_array()) return bad("not an array");
  // Each range covers at least one slot and ranges may not overlap: more entries than slots is
  // malformed, checked before anything is kept.
  if (r.elements.size() > cluster_slot_count) return bad("more ranges than slots");

  // Reads [host, port, id, ...]; nullopt for a malformed node; a port-0 node is returned with port 0.
  auto read_node = [&](const reply& n, std::string& id) -> std::optional<node_address> {
    if (!n.is_array() || n.elements.size() < 2 || !n.elements[0].is_string()) return std::nullopt;
    const auto& port = n.elements[1];
    long long p = -1;
    if (port.is_integer()) p = port.integer;
    else if (port.is_string()) {
      if (auto v = parse_number(port.str, 65535)) p = *v;
    }
    if (p < 0 || p > 65535) return std::nullopt;
    id.clear();
    if (n.elements.size() >= 3) {
      if (!n.elements[2].is_string()) return std::nullopt;
      id = n.elements[2].str;
    }
    std::string host = n.elements[0].str;
    if (host.empty() || host == "?") host = from_host;
    return node_address{std::move(host), static_cast<std::uint16_t>(p)};
  };

  cluster_map& m = out.map;
  std::string id;
  for (const auto& e : r.elements) {
    if (!e.is_array() || e.elements.size() < 3) return bad("a range is not [start, end, master, ...]");
    const auto& s = e.elements[0];
    const auto& t = e.elements[1];
    if (!s.is_integer() || !t.is_integer()) return bad("a range's bounds are not integers");
    if (s.integer < 0 || t.integer < 0 || s.integer >= cluster_slot_count || t.integer >= cluster_slot_count)
      return bad("slot out of range: " + std::to_string(s.integer) + "-" + std::to_string(t.integer));
    if (s.integer > t.integer)
      return bad("range start after its end: " + std::to_string(s.integer) + "-" + std::to_string(t.integer));
    const auto first = static_cast<std::uint16_t>(s.integer);
    const auto last = static_cast<std::uint16_t>(t.integer);
    std::string master_id;
    auto master = read_node(e.elements[2], master_id);
    if (!master) return bad("malformed master of slots " + std::to_string(first) + "-" + std::to_string(last));
    // Replicas are checked as strictly as masters (a malformed one means the reply is not what
    // we think it is), but one with port 0 is only left out.
    std::vector<std::size_t> replicas;
    std::vector<std::pair<node_address, std::string>> replica_nodes;
    for (std::size_t k = 3; k < e.elements.size(); ++k) {
      auto rep = read_node(e.elements[k], id);
      if (!rep) return bad("malformed replica of slots " + std::to_string(first) + "-" + std::to_string(last));
      if (rep->port != 0) replica_nodes.emplace_back(std::move(*rep), id);
    }
    if (master->port == 0) {
      if (!out.text.empty()) out.text += "; ";
      out.text += "slots " + std::to_string(first) + "-" + std::to_string(last) + ": master " + master->host +
                  " has port 0";
      continue;
    }
    for (unsigned slot = first; slot <= last; ++slot) {
      if (m.table_[slot] != cluster_map::no_node) return bad("slot " + std::to_string(slot) + " listed twice");
    }
    auto add = [&](const node_address& a, std::string_view node_id) -> std::optional<std::size_t> {
      if (!m.find(a) && m.nodes_.size() >= cluster_map::max_nodes) return std::nullopt;
      return m.add(a, node_id);
    };
    auto mi = add(*master, master_id);
    if (!mi) return bad("more than " + std::to_string(cluster_map::max_nodes) + " nodes");
    for (auto& [a, rid] : replica_nodes) {
      auto ri = add(a, rid);
      if (!ri) return bad("more than " + std::to_string(cluster_map::max_nodes) + " nodes");
      replicas.push_back(*ri);
    }
    for (unsigned slot = first; slot <= last; ++slot) m.table_[slot] = static_cast<std::uint16_t>(*mi);
    m.covered_ += static_cast<std::size_t>(last - first) + 1;
    m.ranges_.push_back({first, last, *mi, std::move(replicas)});
  }
  return out;
}

cluster_map_result parse_cluster_slots(const reply& r, std::string_view from_host) {
  return cluster_map_builder::build(r, from_host);
}

bool accept_cluster_map(const cluster_map& current, const cluster_map& candidate) noexcept {
  if (current.covers_all() && candidate.covered() < current.covered()) return false;
  if (candidate.covered() == 0 && current.covered() > 0) return false;
  return true;
}

std::optional<cluster_redirect> parse_cluster_redirect(std::string_view text, std::string_view from_host) {
  cluster_redirect out;
  if (starts_with_word(text, "MOVED")) {
    out.type = cluster_redirect::kind::moved;
    text.remove_prefix(5);
  } else if (starts_with_word(text, "ASK")) {
    out.type = cluster_redirect::kind::ask;
    text.remove_prefix(3);
  } else {
    return std::nullopt;
  }
  if (text.empty() || text[0] != ' ') return std::nullopt;
  text.remove_prefix(1);
  const auto sp = text.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto slot = parse_number(text.substr(0, sp), cluster_slot_count - 1);
  if (!slot) return std::nullopt;
  out.slot = static_cast<std::uint16_t>(*slot);
  std::string_view endpoint = text.substr(sp + 1);
  // Redis ends the line after the endpoint; anything else (a trailing word, a second space) means
  // this is not the redirect we know.
  if (endpoint.find(' ') != std::string_view::npos) return std::nullopt;
  const auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto port = parse_number(endpoint.substr(colon + 1), 65535);
  if (!port || *port == 0) return std::nullopt;
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "?") host = from_host;
  out.node = node_address{std::string(host), static_cast<std::uint16_t>(*port)};
  return out;
}

cluster_error classify_cluster_error(std::string_view text) noexcept {
  if (starts_with_word(text, "MOVED")) return cluster_error::moved;
  if (starts_with_word(text, "ASK")) return cluster_error::ask;
  if (starts_with_word(text, "TRYAGAIN")) return cluster_error::tryagain;
  if (starts_with_word(text, "CLUSTERDOWN")) return cluster_error::clusterdown;
  if (starts_with_word(text, "LOADING")) return cluster_error::loading;
  if (starts_with_word(text, "READONLY")) return cluster_error::readonly;
  if (starts_with_word(text, "MASTERDOWN")) return cluster_error::masterdown;
  return cluster_error::none;
}

}  // namespace redlease::detail
