// SPDX-License-Identifier: MIT
#include "topology/sentinel_fsm.hpp"

#include <algorithm>
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
    : nodes_(std::move(configured)), health_(nodes_.size()), configured_(nodes_.size()) {}

void sentinel_directory::failed(std::size_t& c, const std::string& why) {
  if (nodes_.empty()) return;
  const std::size_t i = c % nodes_.size();
  auto& h = health_[i];
  h.why = why;
  // A failure counts only when another Sentinel answered since the last one counted: a client cut
  // off from every Sentinel (its own network down) must not forget the ones it learnt, which may be
  // all that is left when it comes back.
  if (h.failures == 0 || h.answers_at != answers_) {
    ++h.failures;
    h.answers_at = answers_;
  }
  if (!configured(i) && h.failures >= forget_after_failures) {
    c = i;
    forget(i, c);  // the cursor now names the Sentinel after it
    return;
  }
  c = (i + 1) % nodes_.size();
}

void sentinel_directory::answered(std::size_t c) {
  if (nodes_.empty()) return;
  auto& h = health_[c % nodes_.size()];
  h.why.clear();
  h.failures = 0;
  ++answers_;
}

void sentinel_directory::forget(std::size_t i, std::size_t& c) {
  std::size_t at = c % nodes_.size();
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(i));
  health_.erase(health_.begin() + static_cast<std::ptrdiff_t>(i));
  if (at > i) --at;
  c = nodes_.empty() ? 0 : at % nodes_.size();
}

std::size_t sentinel_directory::learn(const reply& r, std::size_t& c) {
  if (!r.is_array() || nodes_.empty()) return 0;
  // The cursor names its Sentinel modulo the size, which the Sentinels added below change: as an
  // index it keeps naming the one that answered (fuzz_sentinel found a cursor past the end).
  c %= nodes_.size();
  const node_address self = current(c);
  std::vector<node_address> listed;
  bool well_formed = true;
  for (auto& entry : r.elements) {
    if (!entry.is_array()) {
      well_formed = false;
      continue;
    }
    std::string ip;
    std::optional<std::uint16_t> port;
    bool down = false;
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
      const auto& f = entry.elements[i].str;
      std::string_view v = entry.elements[i + 1].str;
      if (f == "ip") ip = v;
      else if (f == "port") port = parse_port(v);
      else if (f == "flags") {
        // "s_down,sentinel,disconnected": the answering Sentinel has found this one unreachable
        // for down-after-milliseconds. Sentinels list a peer that has gone for ever (until
        // SENTINEL RESET), flagged so.
        while (!v.empty() && !down) {
          auto comma = v.find(',');
          down = v.substr(0, comma) == "s_down";
          v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
        }
      }
    }
    if (ip.empty() || !port) {
      well_formed = false;
      continue;
    }
    if (!down) listed.push_back(node_address{std::move(ip), *port});
  }
  // The answer is the Sentinels' current view: a learnt Sentinel it leaves out has gone (or was
  // reset away). Its own address is never in it. A partly malformed answer forgets nothing.
  if (well_formed) {
    for (std::size_t i = nodes_.size(); i-- > configured_;) {
      if (nodes_[i] == self) continue;
      if (std::find(listed.begin(), listed.end(), nodes_[i]) == listed.end()) forget(i, c);
    }
  }
  std::size_t added = 0;
  for (auto& a : listed) {
    if (std::find(nodes_.begin(), nodes_.end(), a) != nodes_.end()) continue;
    nodes_.push_back(std::move(a));
    health_.emplace_back();
    ++added;
  }
  return added;
}

std::string sentinel_directory::failures() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (health_[i].why.empty()) continue;
    if (!out.empty()) out += "; ";
    out += to_string(nodes_[i]) + ": " + health_[i].why;
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
