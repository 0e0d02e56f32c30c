// SPDX-License-Identifier: MIT
// `redlease status --redlock --redis URL1 --redis URL2 --redis URL3 NAME...`: a RedLock's key on
// each master (the layout of redsync and node-redlock: a string holding the holder's random value,
// with a TTL), and the verdict: held by a majority with one value, or not.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "redlease/redlease.hpp"
#include "redlock_nodes.hpp"
#include "status_format.hpp"
#include "status_redlock.hpp"

namespace redlease::cli {
namespace {

// What one master holds under the name.
struct node_view {
  std::string node;     // its URL without the password
  std::string state;    // held | free | other (not a string) | error
  std::string value;    // held: the holder's value
  std::string type;     // other: the key's Redis type
  long long ttl_ms = -2;
  std::string error;    // error: what went wrong, in the CLI's words
};

struct redlock_view {
  std::string name;
  std::vector<node_view> nodes;
  std::size_t quorum = 0, answered = 0, holders = 0;  // holders: the masters that hold `value`
  std::string state;  // held (by a majority, one value) | free (no master holds it) | split | unknown
  std::string value;  // held: the majority's value
  bool other = false; // some master holds another type
};

std::string failure_text(const std::string& node, std::error_code ec) {
  const std::string& words = last_error_text();
  return cli_words(node + ": " + (words.empty() ? "" : words + ": ") + ec.message());
}

node_view inspect_node(client& c, const std::string& node, const node_ping& ping, const std::string& name) {
  node_view v;
  v.node = node;
  if (!ping.answered) {
    v.state = "error";
    v.error = ping.ec ? ping.message : node + ": no answer";
    return v;
  }
  std::error_code ec;
  auto fail = [&] {
    v.state = "error";
    v.error = failure_text(node, ec);
    return v;
  };
  const std::string type = c.command({"TYPE", name}, ec).str;
  if (ec) return fail();
  if (type == "none") {
    v.state = "free";
    return v;
  }
  if (type != "string") {
    v.state = "other";
    v.type = type;
  } else {
    auto r = c.command({"GET", name}, ec);
    if (ec) return fail();
    if (r.is_nil()) {  // expired between the two commands
      v.state = "free";
      return v;
    }
    v.state = "held";
    v.value = r.str;
  }
  auto t = c.command({"PTTL", name}, ec);
  if (ec) return fail();
  v.ttl_ms = t.is_integer() ? t.integer : -2;
  return v;
}

redlock_view inspect(redlock_nodes& nodes, const std::vector<node_ping>& pings, const std::string& name) {
  redlock_view s;
  s.name = name;
  s.quorum = nodes.quorum();
  std::map<std::string, std::size_t> count;
  bool any_held = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    s.nodes.push_back(inspect_node(*nodes.clients[i], nodes.labels[i], pings[i], name));
    const auto& v = s.nodes.back();
    if (v.state != "error") ++s.answered;
    s.other = s.other || v.state == "other";
    if (v.state == "held") {
      any_held = true;
      if (++count[v.value] > s.holders) {
        s.holders = count[v.value];
        s.value = v.value;
      }
    }
  }
  if (s.holders >= s.quorum) s.state = "held";
  else if (s.answered < s.quorum) s.state = "unknown";
  else s.state = any_held ? "split" : "free";
  if (s.state != "held") s.value.clear();
  return s;
}

std::string verdict(const redlock_view& s) {
  const std::string of = " of " + std::to_string(s.nodes.size()) + " masters";
  const std::string need = " (" + std::to_string(s.quorum) + " needed)";
  if (s.state == "held")
    return "held by a majority (" + std::to_string(s.holders) + of + ", value " + printable(s.value, true) + ")";
  if (s.state == "unknown")
    return "unknown: only " + std::to_string(s.answered) + of + " answered" + need;
  if (s.state == "free") return "free: not held by a majority (no master holds it)";
  return "not held by a majority: at most " + std::to_string(s.holders) + of + " hold one value" + need;
}

std::string to_json(const redlock_view& s) {
  std::string out = "{\"lock\":" + json_string(s.name) + ",\"kind\":\"redlock\",\"state\":\"" + s.state +
                    "\",\"majority\":" + (s.state == "held" ? "true" : "false") +
                    ",\"value\":" + (s.state == "held" ? json_string(s.value) : std::string("null")) +
                    ",\"holders\":" + std::to_string(s.holders) + ",\"quorum\":" + std::to_string(s.quorum) +
                    ",\"answered\":" + std::to_string(s.answered) + ",\"verdict\":" + json_string(verdict(s)) +
                    ",\"nodes\":[";
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    const auto& v = s.nodes[i];
    out += (i ? ",{\"node\":" : "{\"node\":") + json_string(v.node) + ",\"state\":\"" + v.state + "\"";
    if (v.state == "held") out += ",\"value\":" + json_string(v.value);
    if (v.state == "other") out += ",\"type\":" + json_string(v.type);
    if (v.state == "error") out += ",\"error\":" + json_string(v.error);
    else out += ",\"ttl_ms\":" + std::to_string(v.ttl_ms);
    out += "}";
  }
  return out + "]}";
}

std::string value_text(const node_view& v) {
  if (v.state == "held") return printable(v.value, true) + (v.ttl_ms == -1 ? "; warning: no expiry" : "");
  if (v.state == "other") return "a " + v.type + ": not a RedLock key (a string)";
  if (v.state == "error") return v.error;
  return "-";
}

}  // namespace

int status_redlock(const std::vector<std::string>& given, const std::vector<std::string>& names, bool json) {
  std::string problem;
  const auto urls = redlock_urls(given, problem);
  if (urls.empty()) throw error(errc::invalid_argument, problem, error::whole_message);
  redlock_nodes nodes;
  for (const auto& url : urls) {
    config cfg = make_config(url);
    nodes.labels.push_back(cfg.redacted_url());
    nodes.clients.push_back(std::make_unique<client>(cfg));
  }
  const auto pings = ping_nodes(nodes, std::nullopt);
  bool unknown = false, other = false;
  std::vector<std::vector<std::string>> rows{{"LOCK", "NODE", "STATE", "TTL", "VALUE"}};
  std::vector<std::string> verdicts;
  for (const auto& name : names) {
    const auto s = inspect(nodes, pings, name);
    unknown = unknown || s.state == "unknown";
    other = other || s.other;
    if (json) {
      std::cout << to_json(s) << "\n" << std::flush;
      continue;
    }
    for (const auto& v : s.nodes)
      rows.push_back({printable(s.name, true), v.node, v.state, format_ttl(v.ttl_ms), value_text(v)});
    verdicts.push_back(printable(s.name, true) + ": " + verdict(s));
  }
  if (!json) {
    print_rows(rows);
    for (const auto& v : verdicts) std::cout << v << "\n";
  }
  return unknown ? exit_code::unavailable : other ? exit_code::data_error : exit_code::ok;
}

}  // namespace redlease::cli
