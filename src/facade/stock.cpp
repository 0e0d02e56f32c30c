// SPDX-License-Identifier: MIT
#include "redlease/stock.hpp"

#include <atomic>
#include <charconv>
#include <string>
#include <vector>

#include "facade/client_impl.hpp"
#include "redlease/client.hpp"
#include "redlease_lua.hpp"

namespace redlease {

segmented_stock client::stock(std::string name, std::size_t segments) {
  if (name.empty() || segments == 0 || segments > segmented_stock::max_segments)
    throw error(errc::invalid_argument, "client::stock: empty name, or segments not in 1.." +
                                            std::to_string(segmented_stock::max_segments));
  return segmented_stock(impl_, std::move(name), segments);
}

namespace detail {
struct stock_keys {
  std::string name;
  std::string first;    // segment 0's key: routes every call
  std::string encoded;  // every segment key as RESP bulk strings, in order
  std::vector<std::string> each;  // every segment key
};
}  // namespace detail

segmented_stock::segmented_stock(std::shared_ptr<detail::client_impl> c, std::string name, std::size_t segments)
    : client_(std::move(c)), name_(std::move(name)), segments_(segments) {
  auto k = std::make_shared<detail::stock_keys>();
  k->name = name_;
  k->first = segment_key(0);
  for (std::size_t i = 0; i < segments_; ++i) {
    k->each.push_back(segment_key(i));
    detail::encode_arg(k->encoded, k->each.back());
  }
  keys_ = std::move(k);
}

std::string segmented_stock::segment_key(std::size_t i) const { return name_ + ":" + std::to_string(i); }

asio::any_io_executor segmented_stock::executor() const { return client_->executor(); }

namespace {

// numkeys and the keys of a stock script; the arguments follow.
detail::arg_list keys_of(const std::string& encoded, std::size_t segments) {
  detail::arg_list a;
  a.add(static_cast<long long>(segments));
  a.buf += encoded;
  a.count += segments;
  return a;
}

// Round-robin start segment, so concurrent buyers spread over the segments.
std::atomic<std::uint64_t> next_start{0};

using key_list = detail::stock_keys;

// Executor only. Whether one script call may carry every segment: one slot (a hash tag in the
// name), or a deployment without slots. In a cluster the segments of an untagged name sit on
// several nodes, which is what they are for: one call per segment then (docs/lock-kinds.md says
// what atomicity that keeps).
bool one_call(detail::client_impl& c, const key_list& k) {
  auto& topo = c.topo();
  const auto first = topo.batch_id(k.first);
  for (const auto& key : k.each)
    if (topo.batch_id(key) != first) return false;
  return true;
}

// The error for a segment that holds something DECRBY would refuse, naming it.
void bad_segment(const std::string& name, std::size_t index, std::string_view value) {
  detail::error_text_slot() = "segment key \"" + name + ":" + std::to_string(index) + "\" holds \"" +
                              detail::printable_prefix(value, 64) + "\", not a count";
}

// One segment after another from `start`, each its own call, until one has `n` left.
struct take_walk {
  std::shared_ptr<detail::client_impl> c;
  std::shared_ptr<const key_list> keys;
  long long n = 0;
  std::size_t start = 0;
  std::size_t tried = 0;
  detail::unique_function<void(std::error_code, bool)> h;
};

void take_next(std::shared_ptr<take_walk> w) {
  const auto segments = w->keys->each.size();
  if (w->tried == segments) return w->h({}, false);
  const auto idx = (w->start + w->tried++) % segments;
  const std::string& key = w->keys->each[idx];
  detail::arg_list a;
  a.add(1LL).add(key).add(w->n).add(0LL);
  w->c->exec_script(key, detail::lua::stock_take, std::move(a), [w, idx](std::error_code ec, reply r) mutable {
    if (ec) return w->h(ec, false);
    if (r.is_integer() && r.integer == 1) return w->h({}, true);
    if (r.is_integer() && r.integer == 0) return take_next(std::move(w));
    if (r.is_array() && r.elements.size() == 2) {
      detail::scoped_error_text words("");
      bad_segment(w->keys->name, idx, r.elements[1].str);
      return w->h(errc::bad_reply, false);
    }
    w->h(errc::bad_reply, false);
  });
}

}  // namespace

void segmented_stock::async_try_take_impl(long long n, detail::unique_function<void(std::error_code, bool)> h) {
  // Through run_or_fail like every completion: once the client is closed its executor runs nothing,
  // and a handler posted there would never run.
  if (n <= 0) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, false); });
  const auto start = static_cast<std::size_t>(next_start.fetch_add(1, std::memory_order_relaxed) % segments_);
  auto a = keys_of(keys_->encoded, segments_);
  a.add(n).add(static_cast<long long>(start));
  client_->run_or_fail([c = client_, keys = keys_, segments = segments_, a = std::move(a), n, start,
                        h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    if (!one_call(*c, *keys))
      return take_next(std::make_shared<take_walk>(take_walk{c, keys, n, start, 0, std::move(h)}));
    auto on_reply = [h = std::move(h), keys, segments](std::error_code ec, reply r) mutable {
      if (ec) return h(ec, false);
      if (r.is_integer() && r.integer >= 0 && static_cast<unsigned long long>(r.integer) <= segments)
        return h({}, r.integer > 0);
      // {index, value}: the script met a segment DECRBY would refuse. A typed error naming the key.
      if (r.is_array() && r.elements.size() == 2 && r.elements[0].is_integer() && r.elements[0].integer >= 1 &&
          static_cast<unsigned long long>(r.elements[0].integer) <= segments) {
        detail::scoped_error_text words("");
        bad_segment(keys->name, static_cast<std::size_t>(r.elements[0].integer - 1), r.elements[1].str);
        return h(errc::bad_reply, false);
      }
      h(errc::bad_reply, false);
    };
    c->exec_script(keys->first, detail::lua::stock_take, std::move(a), std::move(on_reply));
  });
}

bool segmented_stock::try_take(long long n, std::error_code& ec) {
  return detail::sync_call<bool>(*client_, ec, [this, n](auto done) { async_try_take_impl(n, std::move(done)); });
}

bool segmented_stock::try_take(long long n) {
  std::error_code ec;
  bool r = try_take(n, ec);
  if (ec) throw_if(ec, ("segmented_stock::try_take \"" + name_ + "\"").c_str());
  return r;
}

void segmented_stock::init(long long total, std::error_code& ec) {
  if (total < 0) {
    ec = errc::invalid_argument;
    return;
  }
  auto a = keys_of(keys_->encoded, segments_);
  // Exact counts, as text: the script never does arithmetic on them (Lua numbers are doubles).
  auto seg = static_cast<long long>(segments_);
  for (long long i = 0; i < seg; ++i) a.add(total / seg + (i < total % seg ? 1 : 0));
  detail::sync_call<bool>(*client_, ec, [c = client_.get(), keys = keys_, a = std::move(a), total, seg](auto done) mutable {
    if (one_call(*c, *keys))
      return c->exec_script(keys->first, detail::lua::stock_init, std::move(a),
                            [done = std::move(done)](std::error_code e, reply) mutable { done(e, !e); });
    // One call per segment: done when every one has answered, with the first error.
    using done_type = decltype(done);
    struct all_set {
      std::size_t left;
      std::error_code first;
      done_type finish;
    };
    auto st = std::make_shared<all_set>(all_set{keys->each.size(), {}, std::move(done)});
    for (long long i = 0; i < seg; ++i) {
      detail::arg_list one;
      one.add(1LL).add(keys->each[static_cast<std::size_t>(i)]).add(total / seg + (i < total % seg ? 1 : 0));
      c->exec_script(keys->each[static_cast<std::size_t>(i)], detail::lua::stock_init, std::move(one),
                     [st](std::error_code e, reply) {
                       if (e && !st->first) st->first = e;
                       if (--st->left == 0) st->finish(st->first, !st->first);
                     });
    }
  });
}

void segmented_stock::init(long long total) {
  std::error_code ec;
  init(total, ec);
  if (ec) throw_if(ec, ("segmented_stock::init \"" + name_ + "\"").c_str());
}

namespace {

// The sum of the segments, or which segment holds something that is not a count, and which came
// back nil (missing, or of another type: MGET cannot tell).
struct stock_sum {
  long long sum = 0;
  std::string bad_key;
  std::string bad_value;
  bool overflow = false;  // the counts read so far sum beyond what a long long holds
  std::vector<std::size_t> nils;
};

// MGET of every segment: one command, or one per segment when they are on several nodes (a sum
// then, not a snapshot). `done` gets the values as one array reply either way.
template <class Done>
void read_segments(detail::client_impl& c, const detail::stock_keys& k, Done done) {
  if (one_call(c, k)) {
    std::string p;
    detail::encode_header(p, k.each.size() + 1);
    detail::encode_arg(p, std::string_view("MGET"));
    p += k.encoded;
    return c.exec(k.first, std::move(p), std::move(done), true);
  }
  struct gather {
    std::size_t left;
    std::error_code first;
    reply all;
    Done done;
  };
  auto st = std::make_shared<gather>(gather{k.each.size(), {}, {}, std::move(done)});
  st->all.type = reply::kind::array;
  st->all.elements.resize(k.each.size());
  for (std::size_t i = 0; i < k.each.size(); ++i) {
    std::string p;
    detail::encode_command(p, {"MGET", k.each[i]});
    c.exec(k.each[i], std::move(p), [st, i](std::error_code e, reply r) {
      if (e && !st->first) st->first = e;
      if (!e && r.is_array() && r.elements.size() == 1) st->all.elements[i] = std::move(r.elements[0]);
      else if (!e && !st->first) st->first = errc::bad_reply;
      if (--st->left == 0) st->done(st->first, std::move(st->all));
    }, true);
  }
}

stock_sum sum_segments(const segmented_stock& s, const detail::stock_keys& k, detail::client_impl& c,
                       std::error_code& ec) {
  return detail::sync_call<stock_sum>(c, ec, [&s, &k, c = &c](auto done) mutable {
    read_segments(*c, k, [&s, done = std::move(done)](std::error_code e, reply r) mutable {
      if (e) return done(e, stock_sum{});
      if (!r.is_array() || r.elements.size() != s.segments()) return done(errc::bad_reply, stock_sum{});
      stock_sum out;
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        auto& el = r.elements[i];
        if (el.is_nil()) {
          out.nils.push_back(i);
          continue;
        }
        long long v = 0;
        auto [q, pe] = std::from_chars(el.str.data(), el.str.data() + el.str.size(), v);
        // A count as Redis's DECRBY reads it: no leading zero, no "-0" (which from_chars would take).
        std::string_view digits = el.str;
        if (!digits.empty() && digits[0] == '-') digits.remove_prefix(1);
        bool canonical = el.str == "0" || (!digits.empty() && digits[0] >= '1' && digits[0] <= '9');
        if (!el.is_string() || !canonical || pe != std::errc{} || q != el.str.data() + el.str.size()) {
          // A value someone else wrote: a typed error naming the key, never an exception here.
          out.bad_key = s.segment_key(i);
          out.bad_value = detail::printable_prefix(el.str, 64);
          return done(errc::bad_reply, std::move(out));
        }
        if (__builtin_add_overflow(out.sum, v, &out.sum)) {
          out.overflow = true;
          return done(errc::bad_reply, std::move(out));
        }
      }
      done({}, std::move(out));
    });
  });
}

}  // namespace

long long segmented_stock::remaining(std::error_code& ec) {
  auto r = sum_segments(*this, *keys_, *client_, ec);
  if (ec == errc::bad_reply && !r.bad_key.empty()) {
    detail::error_text_slot() = "segment key \"" + r.bad_key + "\" holds \"" + r.bad_value + "\", not a count";
    return 0;
  }
  if (ec == errc::bad_reply && r.overflow) {
    detail::error_text_slot() = "the segments of \"" + name_ + "\" hold counts whose sum is outside a signed 64-bit integer";
    return 0;
  }
  if (ec) return 0;
  if (r.nils.empty()) return r.sum;
  // A nil segment counts 0 when it is missing; one of another type is what try_take would meet as
  // bad_reply. Each one's TYPE tells (on its own node: in a cluster the segments are spread, so no
  // one EXISTS can ask for all of them; nil segments are rare, before an init).
  for (auto i : r.nils) {
    const std::string key = segment_key(i);
    std::string type;
    detail::encode_command(type, {"TYPE", key});
    auto t = detail::sync_command(*client_, key, std::move(type), ec, true);
    if (ec) return 0;
    if (t.str != "none" && t.str != "string") {
      ec = errc::bad_reply;
      detail::error_text_slot() = "segment key \"" + key + "\" holds a " + detail::printable_prefix(t.str, 16) +
                                  ", not a count";
      return 0;
    }
  }
  // Changed since the MGET (deleted, or set to a count): counted as the MGET saw it, missing.
  return r.sum;
}

long long segmented_stock::remaining() {
  std::error_code ec;
  auto r = remaining(ec);
  if (ec) throw_if(ec, ("segmented_stock::remaining \"" + name_ + "\"").c_str());
  return r;
}

}  // namespace redlease
