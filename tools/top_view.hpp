// SPDX-License-Identifier: MIT
// What `redlease top` shows, apart from the terminal: the rows of a scan pass sorted and filtered,
// their cells (printable text only), the ages top tracks across passes, and the JSON lines.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lock_scan.hpp"

namespace redlease::cli {

/// The orders `top` sorts by (--sort, the `s` key cycles them in this order).
enum class sort_key { age, name, ttl, waiters, holders, kind };
/// "name" -> sort_key::name; empty for an unknown word.
std::optional<sort_key> parse_sort_key(std::string_view word);
std::string_view sort_key_name(sort_key k);
sort_key next_sort_key(sort_key k);
/// The kinds --kind and the `k` key choose among, in the `k` key's order.
const std::vector<std::string>& top_kinds();

/// When top first saw each hold: a hold is a lock's name with its first holder (a lock without
/// holders, a semaphore or a latch: its name alone), so a lock released and taken again by another
/// owner between two passes starts again. The scan cannot know when a hold began: this is a lower
/// bound, "at least since top saw it".
class age_tracker {
 public:
  using clock = std::chrono::steady_clock;
  /// Records a pass made at `now`: holds not in it are forgotten.
  void observe(const std::vector<found_lock>& pass, clock::time_point now);
  /// How long top has seen the hold of `l` (zero for one it has not seen).
  clock::duration age(const found_lock& l, clock::time_point now) const;

 private:
  std::map<std::pair<std::string, std::string>, clock::time_point> first_seen_;
};

/// What rows `top` shows and in which order.
struct view_filter {
  std::string text;   ///< a substring of the name; empty: any
  std::string kind;   ///< one of top_kinds(); empty: any
  sort_key sort = sort_key::age;
  bool reverse = false;
};

/// Whether `l` is of kind `kind` ("semaphore" and "latch" also match "semaphore or latch").
bool kind_matches(const found_lock& l, const std::string& kind);
/// The rows of `pass` that `f` keeps, in its order (ties by name, then node). `ages` may be null
/// (one pass: no age is known; sort_key::age then orders by name).
std::vector<const found_lock*> select_rows(const std::vector<found_lock>& pass, const view_filter& f,
                                           const age_tracker* ages, age_tracker::clock::time_point now);

/// The pause after a pass that took `took`: at least `interval`, and (100 / `max_load_pct`) x
/// `took`, so that passes keep the server busy at most `max_load_pct` percent of the time.
std::chrono::steady_clock::duration pass_pause(std::chrono::milliseconds interval,
                                               std::chrono::steady_clock::duration took, double max_load_pct);

/// A key of the live view.
enum class key { none, up, down, escape, enter, backspace, ch };
struct key_press {
  key k = key::none;
  char c = 0;  ///< key::ch's character
};
/// The keys in what a read of the terminal returned: arrows are ESC [ A / ESC O A (other escape
/// sequences are skipped); an ESC followed by no '[' or 'O' is Esc.
std::vector<key_press> decode_keys(std::string_view in);

/// "≥12s", "≥3m5s", "≥1h2m".
std::string format_age(std::chrono::steady_clock::duration d);
/// The header of the table, NODE included on a cluster.
std::vector<std::string> table_header(bool cluster);
/// The cells of `l` under table_header(): every one printable ASCII but AGE's "≥" (`age` empty:
/// "-"). HOLDERS names at most `max_holders`, then "+N more".
std::vector<std::string> table_cells(const found_lock& l, bool cluster, const std::string& age,
                                     std::size_t max_holders = SIZE_MAX);
/// The live view's line about the selected lock: every holder and queued waiter the scan listed
/// (a read-write lock's readers, a fair lock's queue, head first), printable ASCII.
std::string selection_line(const found_lock& l);
/// One JSON object (a line of --json).
std::string lock_json(const found_lock& l);

/// The columns a terminal shows for `s`: UTF-8 continuation bytes take none.
std::size_t display_width(std::string_view s);
/// `s` cut to `width` columns ("..." at the end when cut).
std::string clip(const std::string& s, std::size_t width);
/// `rows` (the first is the header) as lines, each column as wide as its widest cell (at most
/// `max_cell` columns) plus two spaces, the last one unpadded.
std::vector<std::string> layout_rows(const std::vector<std::vector<std::string>>& rows, std::size_t max_cell);

}  // namespace redlease::cli
