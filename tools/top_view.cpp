// SPDX-License-Identifier: MIT
// `redlease top`'s rows: sorting, filtering, the ages tracked across passes, the cells and the JSON
// (top_view.hpp). No terminal here: cli_top.cpp draws.
#include "top_view.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <set>
#include <tuple>

#include "status_format.hpp"

namespace redlease::cli {
namespace {

constexpr std::array<std::pair<sort_key, std::string_view>, 6> sort_names{{{sort_key::age, "age"},
                                                                         {sort_key::name, "name"},
                                                                         {sort_key::ttl, "ttl"},
                                                                         {sort_key::waiters, "waiters"},
                                                                         {sort_key::holders, "holders"},
                                                                         {sort_key::kind, "kind"}}};

std::pair<std::string, std::string> hold_of(const found_lock& l) {
  return {l.node + '\n' + l.name, l.holders.empty() ? std::string() : l.holders.front()};
}

// A TTL in ascending order of "frees itself soonest": no expiry after every TTL, none (-2) last.
long long ttl_rank(long long ttl_ms) {
  if (ttl_ms >= 0) return ttl_ms;
  return ttl_ms == -1 ? LLONG_MAX - 1 : LLONG_MAX;
}

std::string holders_cell(const found_lock& l, std::size_t max_holders) {
  if (l.holders.empty()) return "-";
  const std::size_t shown = std::min(max_holders, l.holders.size());
  std::string out;
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + printable(l.holders[i], true);
  const long long more = std::max(l.holder_count, static_cast<long long>(l.holders.size())) - static_cast<long long>(shown);
  if (more > 0) out += " +" + std::to_string(more) + " more";
  return out;
}

std::string holds_cell(const found_lock& l) {
  if (!l.mode.empty()) return printable(l.mode, true) + " " + std::to_string(l.holder_count);
  if (l.holders.empty()) return "-";
  return std::to_string(l.hold_count);
}

std::string detail_cell(const found_lock& l) {
  if (l.kind == "fair" || l.queue_length > 0) {
    if (l.queue.empty()) return "queue " + std::to_string(l.queue_length);
    return "queue " + std::to_string(l.queue_length) + ", head " + printable(l.queue.front(), true);
  }
  if (l.kind == "latch") return "count " + std::to_string(l.permits);
  if (l.kind == "semaphore or latch") return "value " + std::to_string(l.permits);
  std::string out;
  if (l.permits >= 0) out = "permits " + std::to_string(l.permits);
  if (l.permits_out >= 0) out += (out.empty() ? "out " : ", out ") + std::to_string(l.permits_out);
  return out.empty() ? "-" : out;
}

}  // namespace

std::optional<sort_key> parse_sort_key(std::string_view word) {
  for (const auto& [k, n] : sort_names)
    if (n == word) return k;
  return std::nullopt;
}

std::string_view sort_key_name(sort_key k) {
  for (const auto& [key, n] : sort_names)
    if (key == k) return n;
  return "age";
}

sort_key next_sort_key(sort_key k) {
  for (std::size_t i = 0; i < sort_names.size(); ++i)
    if (sort_names[i].first == k) return sort_names[(i + 1) % sort_names.size()].first;
  return sort_key::age;
}

const std::vector<std::string>& top_kinds() {
  static const std::vector<std::string> kinds{"reentrant", "fair",     "read-write", "mutex",
                                              "semaphore", "permit-semaphore", "latch"};
  return kinds;
}

void age_tracker::observe(const std::vector<found_lock>& pass, clock::time_point now) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& l : pass) {
    auto key = hold_of(l);
    first_seen_.try_emplace(key, now);
    seen.insert(std::move(key));
  }
  std::erase_if(first_seen_, [&](const auto& e) { return !seen.contains(e.first); });
}

age_tracker::clock::duration age_tracker::age(const found_lock& l, clock::time_point now) const {
  auto it = first_seen_.find(hold_of(l));
  return it == first_seen_.end() ? clock::duration::zero() : now - it->second;
}

bool kind_matches(const found_lock& l, const std::string& kind) {
  if (kind.empty() || l.kind == kind) return true;
  return l.kind == "semaphore or latch" && (kind == "semaphore" || kind == "latch");
}

std::vector<const found_lock*> select_rows(const std::vector<found_lock>& pass, const view_filter& f,
                                           const age_tracker* ages, age_tracker::clock::time_point now) {
  std::vector<const found_lock*> rows;
  for (const auto& l : pass)
    if (kind_matches(l, f.kind) && (f.text.empty() || l.name.find(f.text) != std::string::npos)) rows.push_back(&l);
  // Each order puts first what an operator looks for: the oldest holds, the locks that free
  // themselves soonest, the most waiters, the most holders.
  auto key = [&](const found_lock* l) -> long long {
    switch (f.sort) {
      case sort_key::age: return ages == nullptr ? 0 : -ages->age(*l, now).count();
      case sort_key::ttl: return ttl_rank(l->ttl_ms);
      case sort_key::waiters: return -l->waiters;
      case sort_key::holders: return -l->holder_count;
      case sort_key::name:
      case sort_key::kind: return 0;
    }
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const found_lock* a, const found_lock* b) {
    static const std::string none;
    const std::string& ka = f.sort == sort_key::kind ? a->kind : none;
    const std::string& kb = f.sort == sort_key::kind ? b->kind : none;
    const long long na = key(a), nb = key(b);
    auto ta = std::tie(na, ka, a->name, a->node);
    auto tb = std::tie(nb, kb, b->name, b->node);
    return f.reverse ? tb < ta : ta < tb;
  });
  return rows;
}

std::chrono::steady_clock::duration pass_pause(std::chrono::milliseconds interval,
                                               std::chrono::steady_clock::duration took, double max_load_pct) {
  // A pass that took T kept the server busy about T (measured, not estimated: the keyspace's size
  // and the server's speed are in it); resting (100 / pct) x T after it keeps the share under pct.
  const auto rest = std::chrono::duration_cast<std::chrono::steady_clock::duration>(took * (100.0 / max_load_pct));
  return std::max<std::chrono::steady_clock::duration>(interval, rest);
}

std::vector<key_press> decode_keys(std::string_view in) {
  std::vector<key_press> out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '\x1b') {
      if (i + 2 < in.size() && (in[i + 1] == '[' || in[i + 1] == 'O')) {
        const char f = in[i + 2];
        i += 2;
        if (f == 'A') out.push_back({key::up});
        else if (f == 'B') out.push_back({key::down});
        else  // another sequence (a function key, PgUp): up to its final byte
          while (i < in.size() && !(in[i] >= '@' && in[i] <= '~')) ++i;
        continue;
      }
      out.push_back({key::escape});
    } else if (c == '\r' || c == '\n') {
      out.push_back({key::enter});
    } else if (c == 0x7f || c == 0x08) {
      out.push_back({key::backspace});
    } else {
      out.push_back({key::ch, c});
    }
  }
  return out;
}

std::string format_age(std::chrono::steady_clock::duration d) {
  long long s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  std::string t;
  if (s < 60) t = std::to_string(s) + "s";
  else if (s < 3600) t = std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  else t = std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
  return "\xe2\x89\xa5" + t;  // U+2265: at least
}

std::vector<std::string> table_header(bool cluster) {
  std::vector<std::string> h{"LOCK", "KIND", "HOLDERS", "HOLDS", "TTL", "AGE", "WAITERS", "DETAIL"};
  if (cluster) h.insert(h.end() - 1, "NODE");
  return h;
}

std::vector<std::string> table_cells(const found_lock& l, bool cluster, const std::string& age,
                                     std::size_t max_holders) {
  std::vector<std::string> c{printable(l.name, true), printable(l.kind),     holders_cell(l, max_holders), holds_cell(l),
                             format_ttl(l.ttl_ms),    age.empty() ? "-" : age, std::to_string(l.waiters),
                             detail_cell(l)};
  if (cluster) c.insert(c.end() - 1, printable(l.node, true));
  return c;
}

std::string selection_line(const found_lock& l) {
  auto list = [](const std::vector<std::string>& v, long long all) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + printable(v[i], true);
    const long long more = all - static_cast<long long>(v.size());
    return more > 0 ? out + " +" + std::to_string(more) + " more" : out;
  };
  std::string out = printable(l.name, true) + ":";
  if (!l.holders.empty())
    out += std::string(l.mode == "read" ? " readers " : " holders ") + list(l.holders, l.holder_count);
  if (l.queue_length > 0) out += (l.holders.empty() ? " queue " : "; queue ") + list(l.queue, l.queue_length);
  if (l.holders.empty() && l.queue_length == 0) out += " " + detail_cell(l);
  return out;
}

std::string lock_json(const found_lock& l) {
  auto list = [](const std::vector<std::string>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_string(v[i]);
    return out + "]";
  };
  std::string out = "{\"lock\":" + json_string(l.name) + ",\"kind\":" + json_string(l.kind) +
                    (l.node.empty() ? std::string() : ",\"node\":" + json_string(l.node)) +
                    ",\"ttl_ms\":" + std::to_string(l.ttl_ms) +
                    ",\"holders\":" + list(l.holders) + ",\"holder_count\":" + std::to_string(l.holder_count) +
                    ",\"hold_count\":" + std::to_string(l.hold_count);
  if (!l.mode.empty()) out += ",\"mode\":" + json_string(l.mode);
  if (l.kind == "fair" || l.queue_length > 0)
    out += ",\"queue\":" + list(l.queue) + ",\"queue_length\":" + std::to_string(l.queue_length);
  if (l.permits >= 0) out += ",\"permits\":" + std::to_string(l.permits);
  if (l.permits_out >= 0) out += ",\"permits_out\":" + std::to_string(l.permits_out);
  return out + ",\"waiters\":" + std::to_string(l.waiters) + "}";
}

std::size_t display_width(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

std::string clip(const std::string& s, std::size_t width) {
  if (display_width(s) <= width) return s;
  const std::size_t keep = width < 3 ? width : width - 3;
  std::string out;
  std::size_t cols = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(s[i]) & 0xc0) != 0x80;
    if (starts && cols++ == keep) break;
    out += s[i];
  }
  return width < 3 ? out : out + "...";
}

std::vector<std::string> layout_rows(const std::vector<std::vector<std::string>>& rows, std::size_t max_cell) {
  std::vector<std::string> lines;
  if (rows.empty()) return lines;
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::min(max_cell, std::max(width[i], display_width(r[i])));
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::string cell = clip(r[i], i + 1 < r.size() ? width[i] : max_cell);
      line += cell;
      if (i + 1 < r.size()) line += std::string(width[i] - display_width(cell) + 2, ' ');
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace redlease::cli
