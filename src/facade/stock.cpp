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

struct segmented_stock::key_list {
  std::string name;
  std::string first;    // segment 0's key: routes every call
  std::string encoded;  // every segment key as RESP bulk strings, in order
};

segmented_stock::segmented_stock(std::shared_ptr<detail::client_impl> c, std::string name, std::size_t segments)
    : client_(std::move(c)), name_(std::move(name)), segments_(segments) {
  auto k = std::make_shared<key_list>();
  k->name = name_;
  k->first = segment_key(0);
  for (std::size_t i = 0; i < segments_; ++i) detail::encode_arg(k->encoded, segment_key(i));
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

}  // namespace

void segmented_stock::async_try_take_impl(long long n, detail::unique_function<void(std::error_code, bool)> h) {
  // Through run_or_fail like every completion: once the client is closed its executor runs nothing,
  // and a handler posted there would never run.
  if (n <= 0) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, false); });
  auto a = keys_of(keys_->encoded, segments_);
  a.add(n).add(static_cast<long long>(next_start.fetch_add(1, std::memory_order_relaxed) % segments_));
  client_->run_or_fail([c = client_, keys = keys_, segments = segments_, a = std::move(a),
                        h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    auto on_reply = [h = std::move(h), keys, segments](std::error_code ec, reply r) mutable {
      if (ec) return h(ec, false);
      if (r.is_integer() && r.integer >= 0 && static_cast<unsigned long long>(r.integer) <= segments)
        return h({}, r.integer > 0);
      // {index, value}: the script met a segment DECRBY would refuse. A typed error naming the key.
      if (r.is_array() && r.elements.size() == 2 && r.elements[0].is_integer() && r.elements[0].integer >= 1 &&
          static_cast<unsigned long long>(r.elements[0].integer) <= segments) {
        detail::scoped_error_text words("segment key \"" + keys->name + ":" + std::to_string(r.elements[0].integer - 1) +
                                        "\" holds \"" + detail::printable_prefix(r.elements[1].str, 64) +
                                        "\", not a count");
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
  detail::sync_call<bool>(*client_, ec, [c = client_.get(), keys = keys_, a = std::move(a)](auto done) mutable {
    c->exec_script(keys->first, detail::lua::stock_init, std::move(a),
                   [done = std::move(done)](std::error_code e, reply) mutable { done(e, !e); });
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

stock_sum sum_segments(const segmented_stock& s, const std::string& first, const std::string& encoded,
                       detail::client_impl& c, std::error_code& ec) {
  std::string p;
  detail::encode_header(p, s.segments() + 1);
  detail::encode_arg(p, std::string_view("MGET"));
  p += encoded;
  return detail::sync_call<stock_sum>(c, ec, [&s, &first, c = &c, p = std::move(p)](auto done) mutable {
    c->exec(first, std::move(p), [&s, done = std::move(done)](std::error_code e, reply r) mutable {
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
    }, true);
  });
}

}  // namespace

long long segmented_stock::remaining(std::error_code& ec) {
  auto r = sum_segments(*this, keys_->first, keys_->encoded, *client_, ec);
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
  // bad_reply. One EXISTS over them tells; only then is each one's TYPE asked, to name it.
  std::string exists;
  detail::encode_header(exists, r.nils.size() + 1);
  detail::encode_arg(exists, std::string_view("EXISTS"));
  for (auto i : r.nils) detail::encode_arg(exists, segment_key(i));
  auto n = detail::sync_command(*client_, keys_->first, std::move(exists), ec, true);
  if (ec) return 0;
  if (!n.is_integer()) {
    ec = errc::bad_reply;
    return 0;
  }
  if (n.integer == 0) return r.sum;
  for (auto i : r.nils) {
    const std::string key = segment_key(i);
    std::string type;
    detail::encode_command(type, {"TYPE", key});
    auto t = detail::sync_command(*client_, keys_->first, std::move(type), ec, true);
    if (ec) return 0;
    if (t.str != "none" && t.str != "string") {
      ec = errc::bad_reply;
      detail::error_text_slot() = "segment key \"" + key + "\" holds a " + detail::printable_prefix(t.str, 16) +
                                  ", not a count";
      return 0;
    }
  }
  // Changed since the EXISTS (deleted, or set to a count): counted as the MGET saw it, missing.
  return r.sum;
}

long long segmented_stock::remaining() {
  std::error_code ec;
  auto r = remaining(ec);
  if (ec) throw_if(ec, ("segmented_stock::remaining \"" + name_ + "\"").c_str());
  return r;
}

}  // namespace redlease
