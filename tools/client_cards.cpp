// SPDX-License-Identifier: MIT
// Reading the clients' cards for `redlease status`.
#include "client_cards.hpp"

#include <charconv>

#include "commands.hpp"
#include "status_format.hpp"

namespace redlease::cli {
namespace {

// A scan of the keyspace for cards stops after this many SCAN calls (of scan_count keys each), so
// that a status on a server of millions of keys stays a fraction of a second; it then says "at least".
constexpr int scan_calls = 20;
constexpr const char* scan_count = "1000";

card_view parse(const reply& fields) {
  card_view v;
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    const auto& f = fields.elements[i].str;
    const auto& x = fields.elements[i + 1].str;
    if (f == "host") v.host = x;
    else if (f == "pid") v.pid = x;
    else if (f == "program") v.program = x;
    else if (f == "name") v.name = x;
  }
  return v;
}

}  // namespace

std::map<std::string, card_view> read_cards(client& c, const std::vector<std::string>& ids) {
  std::map<std::string, card_view> out;
  for (const auto& id : ids) {
    if (id.empty() || out.count(id)) continue;
    std::error_code ec;
    auto r = c.command({"HGETALL", client_card_key(id)}, ec);
    if (!ec && r.is_array() && !r.elements.empty()) out.emplace(id, parse(r));
  }
  return out;
}

std::string card_text(const card_view* card) {
  if (card == nullptr) return "(no description: an older client or another library)";
  return "(host " + printable(card->host, true) + ", pid " + printable(card->pid, true) + ", program " +
         printable(card->program, true) + ", name " + printable(card->name, true) + ")";
}

std::string card_json(const card_view* card) {
  if (card == nullptr) return "null";
  return "{\"host\":" + json_string(card->host) + ",\"pid\":" + json_string(card->pid) +
         ",\"program\":" + json_string(card->program) + ",\"name\":" + json_string(card->name) + "}";
}

waiting_writers find_waiting_writers(const std::vector<client*>& nodes, std::string_view name) {
  waiting_writers out;
  const std::string field = client_card_wait_field(name);
  const std::string pattern(client_card_pattern());
  const std::string prefix = client_card_key("");  // "redlease:client:{}"
  int calls = 0;
  // The cards are spread over a cluster's masters: each keeps its own keyspace to scan. The cap is
  // on the calls of all of them together.
  for (client* node : nodes) {
    client& c = *node;
    std::string cursor = "0";
    do {
      std::error_code ec;
      auto step = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", scan_count}, ec);
      if (ec || step.elements.size() != 2) {
        out.complete = false;
        break;
      }
      cursor = step.elements[0].str;
      for (const auto& k : step.elements[1].elements) {
        auto since = c.command({"HGET", k.str, field}, ec);
        if (ec || !since.is_string()) continue;
        waiting_writer w;
        // The id is what the key's hash tag holds: redlease:client:{<id>}.
        if (k.str.size() > prefix.size()) w.client = k.str.substr(prefix.size() - 1, k.str.size() - prefix.size());
        std::string_view text = since.str;
        if (auto p = text.rfind(' '); p != std::string_view::npos) text.remove_prefix(p + 1);
        std::from_chars(text.data(), text.data() + text.size(), w.since_ms);
        auto all = c.command({"HGETALL", k.str}, ec);
        if (!ec) w.card = parse(all);
        out.found.push_back(std::move(w));
      }
    } while (cursor != "0" && ++calls < scan_calls);
    if (cursor != "0") out.complete = false;
    if (!out.complete) break;
  }
  return out;
}

}  // namespace redlease::cli
