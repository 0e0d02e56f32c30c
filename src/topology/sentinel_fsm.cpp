// SPDX-License-Identifier: MIT
#include "topology/sentinel_fsm.hpp"

#include <charconv>

#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

}  // namespace

sentinel_directory::sentinel_directory(std::vector<node_address> configured)
    : nodes_(std::move(configured)), why_(nodes_.size()) {}

void sentinel_directory::failed(std::size_t& c, const std::string& why) {
  if (nodes_.empty()) return;
  why_[c % nodes_.size()] = why;
  c = (c + 1) % nodes_.size();
}

void sentinel_directory::answered(std::size_t c) {
  if (!nodes_.empty()) why_[c % nodes_.size()].clear();
}

std::size_t sentinel_directory::learn(const reply& r) {
  if (!r.is_array()) return 0;
  std::size_t added = 0;
  for (auto& entry : r.elements) {
    if (!entry.is_array()) continue;
    std::string ip;
    std::optional<std::uint16_t> port;
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
      if (entry.elements[i].str == "ip") ip = entry.elements[i + 1].str;
      else if (entry.elements[i].str == "port") port = parse_port(entry.elements[i + 1].str);
    }
    if (ip.empty() || !port) continue;
    node_address a{ip, *port};
    bool known = false;
    for (auto& n : nodes_) known = known || n == a;
    if (known) continue;
    nodes_.push_back(std::move(a));
    why_.emplace_back();
    ++added;
  }
  return added;
}

std::string sentinel_directory::failures() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (why_[i].empty()) continue;
    if (!out.empty()) out += "; ";
    out += to_string(nodes_[i]) + ": " + why_[i];
  }
  return out;
}

master_answer parse_master_addr(const reply& r, std::string_view sentinel, std::string_view master_name) {
  master_answer a;
  if (r.is_error()) {
    a.ec = error_from_reply_text(r.str);
    a.text = "Sentinel " + std::string(sentinel) + ": " + r.str;
    return a;
  }
  if (r.is_nil()) {
    a.ec = errc::no_sentinel;
    a.text = "Sentinel " + std::string(sentinel) + " does not know a master named '" + std::string(master_name) +
             "' (check the ?master= of the URL)";
    return a;
  }
  std::optional<std::uint16_t> port;
  if (r.is_array() && r.elements.size() == 2 && r.elements[0].is_string() && r.elements[1].is_string())
    port = parse_port(r.elements[1].str);
  if (!port || r.elements[0].str.empty()) {
    a.ec = errc::bad_reply;
    a.text = "Sentinel " + std::string(sentinel) + " answered GET-MASTER-ADDR-BY-NAME with something that is not an address";
    return a;
  }
  a.address = node_address{r.elements[0].str, *port};
  return a;
}

master_answer parse_master_info(const reply& r, std::string_view sentinel, std::string_view master_name) {
  master_answer a;
  if (r.is_error()) {
    a.ec = r.str.find("No such master") != std::string::npos ? std::error_code(errc::no_sentinel)
                                                              : error_from_reply_text(r.str);
    a.text = a.ec == errc::no_sentinel ? "Sentinel " + std::string(sentinel) + " does not know a master named '" +
                                             std::string(master_name) + "' (check the ?master= of the URL)"
                                       : "Sentinel " + std::string(sentinel) + ": " + r.str;
    return a;
  }
  std::string ip;
  std::optional<std::uint16_t> port;
  if (r.is_array()) {
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      auto& f = r.elements[i].str;
      auto& v = r.elements[i + 1].str;
      if (f == "ip") ip = v;
      else if (f == "port") port = parse_port(v);
      else if (f == "config-epoch") {
        long long e = -1;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), e);
        if (ec == std::errc{} && p == v.data() + v.size() && e >= 0) a.epoch = e;
      }
    }
  }
  if (ip.empty() || !port) {
    a.ec = errc::bad_reply;
    a.text = "Sentinel " + std::string(sentinel) + " answered SENTINEL MASTER without the master's address";
    return a;
  }
  a.address = node_address{ip, *port};
  return a;
}

master_tracker::verdict master_tracker::move_to(const node_address& a) {
  if (!current_) {
    current_ = a;
    return verdict::first;
  }
  if (*current_ == a) return verdict::same;
  previous_ = current_;
  current_ = a;
  return verdict::switched;
}

master_tracker::verdict master_tracker::answer(const node_address& a, long long epoch) {
  if (epoch >= 0 && (epoch < epoch_ || epoch < min_epoch_)) return verdict::stale;
  if (epoch >= 0) epoch_ = epoch;
  return move_to(a);
}

master_tracker::verdict master_tracker::switch_message(const node_address& a) {
  auto v = move_to(a);
  // The switch came with a new epoch, which answers will show; the epoch of the old one is stale.
  if (v == verdict::switched && epoch_ >= 0) min_epoch_ = epoch_ + 1;
  return v;
}

std::optional<node_address> parse_switch_master(std::string_view payload, std::string_view master_name) {
  std::vector<std::string_view> words;
  while (!payload.empty()) {
    auto sp = payload.find(' ');
    auto w = payload.substr(0, sp);
    if (!w.empty()) words.push_back(w);
    payload = sp == std::string_view::npos ? std::string_view{} : payload.substr(sp + 1);
  }
  if (words.size() != 5 || words[0] != master_name) return std::nullopt;
  auto port = parse_port(words[4]);
  if (!port) return std::nullopt;
  return node_address{std::string(words[3]), *port};
}

}  // namespace redlease::detail
