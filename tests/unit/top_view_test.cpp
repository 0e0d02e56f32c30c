// SPDX-License-Identifier: MIT
// What `redlease top` shows, without a terminal or a server (tools/top_view.cpp): the ages tracked
// across passes, the orders and filters, the cells, the pause between passes, the keys.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "top_view.hpp"

namespace redlease::cli {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

found_lock lock_named(std::string name, std::string kind, std::vector<std::string> holders = {}) {
  found_lock l;
  l.name = std::move(name);
  l.kind = std::move(kind);
  l.holder_count = static_cast<long long>(holders.size());
  l.hold_count = l.holder_count;
  l.holders = std::move(holders);
  return l;
}

std::vector<std::string> names(const std::vector<const found_lock*>& rows) {
  std::vector<std::string> out;
  for (const auto* r : rows) out.push_back(r->name);
  return out;
}

TEST(top_view, age_is_since_the_hold_was_first_seen_and_restarts_with_another_holder) {
  age_tracker t;
  const auto t0 = clock::now();
  std::vector<found_lock> pass{lock_named("a", "reentrant", {"c1:1"}), lock_named("b", "mutex", {"tok"})};
  t.observe(pass, t0);
  t.observe(pass, t0 + 5s);
  EXPECT_EQ(t.age(pass[0], t0 + 7s), 7s);
  // Another holder took "a" between two passes: its age starts again.
  pass[0].holders = {"c2:1"};
  t.observe(pass, t0 + 8s);
  EXPECT_EQ(t.age(pass[0], t0 + 9s), 1s);
  EXPECT_EQ(t.age(pass[1], t0 + 9s), 9s);
  // A lock not seen in a pass is forgotten: seen again, it starts again.
  t.observe({pass[0]}, t0 + 10s);
  t.observe(pass, t0 + 11s);
  EXPECT_EQ(t.age(pass[1], t0 + 12s), 1s);
  EXPECT_EQ(t.age(lock_named("never", "mutex"), t0 + 12s), clock::duration::zero());
}

TEST(top_view, orders_and_filters) {
  std::vector<found_lock> pass{lock_named("b", "reentrant", {"x:1"}), lock_named("a", "mutex", {"t"}),
                               lock_named("c", "semaphore or latch"), lock_named("d", "fair", {"y:1"})};
  pass[0].ttl_ms = 5000;
  pass[1].ttl_ms = -1;
  pass[2].ttl_ms = 100;
  pass[3].ttl_ms = 20000;
  pass[3].waiters = 4;
  pass[0].waiters = 1;
  age_tracker ages;
  const auto t0 = clock::now();
  ages.observe({pass[2]}, t0);
  ages.observe({pass[2], pass[0]}, t0 + 1s);
  ages.observe(pass, t0 + 2s);
  view_filter f;
  // Oldest first; the ones seen together by name.
  EXPECT_EQ(names(select_rows(pass, f, &ages, t0 + 3s)), (std::vector<std::string>{"c", "b", "a", "d"}));
  // One pass knows no age: by name.
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"a", "b", "c", "d"}));
  f.sort = sort_key::ttl;  // soonest expiry first, no expiry last
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"c", "b", "d", "a"}));
  f.reverse = true;
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"a", "d", "b", "c"}));
  f.reverse = false;
  f.sort = sort_key::waiters;
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"d", "b", "a", "c"}));
  f.sort = sort_key::kind;
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"d", "a", "b", "c"}));
  // A whole number no waiter tells apart is shown for either kind.
  f.kind = "latch";
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"c"}));
  f.kind.clear();
  f.text = "d";
  EXPECT_EQ(names(select_rows(pass, f, nullptr, t0)), (std::vector<std::string>{"d"}));
  EXPECT_EQ(next_sort_key(sort_key::kind), sort_key::age);
  EXPECT_EQ(parse_sort_key("ttl"), sort_key::ttl);
  EXPECT_FALSE(parse_sort_key("size"));
}

TEST(top_view, cells_escape_names_and_say_what_each_kind_holds) {
  auto evil = lock_named("x\x1b[2Jy", "reentrant", {"c\x07:1", "d:1"});
  evil.holder_count = 5;
  evil.hold_count = 3;
  auto c = table_cells(evil, false, format_age(12s));
  ASSERT_EQ(c.size(), table_header(false).size());
  EXPECT_EQ(c[0], "x\\x1b[2Jy");
  EXPECT_EQ(c[2], "c\\x07:1, d:1 +3 more");
  EXPECT_EQ(table_cells(evil, false, "", 1)[2], "c\\x07:1 +4 more");
  EXPECT_EQ(c[3], "3");
  EXPECT_EQ(c[5], "\xe2\x89\xa5" "12s");
  auto rw = lock_named("rw", "read-write", {"a:1", "b:1"});
  rw.mode = "read";
  EXPECT_EQ(table_cells(rw, false, "")[3], "read 2");
  auto fair = lock_named("f", "fair", {"a:1"});
  fair.queue = {"q:1"};
  fair.queue_length = 2;
  EXPECT_EQ(table_cells(fair, false, "").back(), "queue 2, head q:1");
  EXPECT_EQ(selection_line(fair), "f: holders a:1; queue q:1 +1 more");
  EXPECT_EQ(selection_line(rw), "rw: readers a:1, b:1");
  auto sem = lock_named("s", "permit-semaphore");
  sem.permits = 3;
  sem.permits_out = 1;
  EXPECT_EQ(table_cells(sem, false, "").back(), "permits 3, out 1");
  EXPECT_EQ(selection_line(sem), "s: permits 3, out 1");
  auto latch = lock_named("l", "latch");
  latch.permits = 4;
  EXPECT_EQ(table_cells(latch, false, "").back(), "count 4");
  latch.node = "10.0.0.1:7000";
  EXPECT_EQ(table_cells(latch, true, "")[7], "10.0.0.1:7000");
  EXPECT_EQ(table_header(true)[7], "NODE");
  EXPECT_EQ(lock_json(latch), "{\"lock\":\"l\",\"kind\":\"latch\",\"node\":\"10.0.0.1:7000\",\"ttl_ms\":-2,"
                              "\"holders\":[],\"holder_count\":0,\"hold_count\":0,\"permits\":4,\"waiters\":0}");
}

TEST(top_view, ages_widths_and_clipping) {
  EXPECT_EQ(format_age(3min + 5s), "\xe2\x89\xa5" "3m5s");
  EXPECT_EQ(format_age(1h + 2min + 9s), "\xe2\x89\xa5" "1h2m");
  EXPECT_EQ(display_width("\xe2\x89\xa5" "12s"), 4u);
  EXPECT_EQ(clip("abcdefgh", 6), "abc...");
  EXPECT_EQ(clip("abc", 6), "abc");
  auto lines = layout_rows({{"A", "B"}, {"\xe2\x89\xa5" "1s", "x"}}, 40);
  EXPECT_EQ(lines[0], "A    B");
  EXPECT_EQ(lines[1], "\xe2\x89\xa5" "1s  x");
}

TEST(top_view, passes_are_spaced_by_their_own_cost) {
  EXPECT_EQ(pass_pause(1000ms, 10ms, 5), 1000ms);           // a cheap pass: the interval
  EXPECT_EQ(pass_pause(1000ms, 200ms, 5), 4000ms);          // 20 x 200 ms: 5 %
  EXPECT_EQ(pass_pause(100ms, 100ms, 50), 200ms);
}

TEST(top_view, keys) {
  auto k = decode_keys("q\x1b[A\x1b[B\x1bOA\x1b\r\x7f\x1b[5~s");
  ASSERT_EQ(k.size(), 8u);
  EXPECT_EQ(k[0].k, key::ch);
  EXPECT_EQ(k[0].c, 'q');
  EXPECT_EQ(k[1].k, key::up);
  EXPECT_EQ(k[2].k, key::down);
  EXPECT_EQ(k[3].k, key::up);
  EXPECT_EQ(k[4].k, key::escape);
  EXPECT_EQ(k[5].k, key::enter);
  EXPECT_EQ(k[6].k, key::backspace);
  EXPECT_EQ(k[7].c, 's');  // PgUp skipped
}

}  // namespace
}  // namespace redlease::cli
