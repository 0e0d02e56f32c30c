// SPDX-License-Identifier: MIT
#include "redlease/stock.hpp"

#include <atomic>
#include <charconv>

#include "client_impl.hpp"
#include "redlease/client.hpp"
#include "redlease_lua.hpp"

namespace redlease {

segmented_stock client::stock(std::string name, std::size_t segments) {
  if (name.empty() || segments == 0) throw error(errc::invalid_argument, "client::stock: empty name or no segments");
  return segmented_stock(impl_, std::move(name), segments);
}

segmented_stock::segmented_stock(std::shared_ptr<detail::client_impl> c, std::string name, std::size_t segments)
    : client_(std::move(c)), name_(std::move(name)), segments_(segments) {}

std::string segmented_stock::segment_key(std::size_t i) const { return name_ + ":" + std::to_string(i); }

asio::any_io_executor segmented_stock::executor() const { return client_->executor(); }

namespace {

detail::arg_list keys_of(const segmented_stock& s) {
  detail::arg_list a;
  a.add(static_cast<long long>(s.segments()));
  for (std::size_t i = 0; i < s.segments(); ++i) a.add(s.segment_key(i));
  return a;
}

// Round-robin start segment, so concurrent buyers spread over the segments.
std::atomic<std::uint64_t> next_start{0};

}  // namespace

void segmented_stock::async_try_take_impl(long long n, detail::unique_function<void(std::error_code, bool)> h) {
  if (n <= 0) return h(errc::invalid_argument, false);
  auto a = keys_of(*this);
  a.add(n).add(static_cast<long long>(next_start.fetch_add(1, std::memory_order_relaxed) % segments_));
  client_->run_or_fail([c = client_, key = segment_key(0), a = std::move(a), h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    c->exec_script(key, detail::lua::stock_take, std::move(a), [h = std::move(h)](std::error_code ec, reply r) mutable {
      if (ec) return h(ec, false);
      if (!r.is_integer()) return h(errc::bad_reply, false);
      h({}, r.integer > 0);
    });
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
  auto a = keys_of(*this);
  a.add(total);
  detail::sync_call<bool>(*client_, ec, [c = client_.get(), key = segment_key(0), a = std::move(a)](auto done) mutable {
    c->exec_script(key, detail::lua::stock_init, std::move(a),
                   [done = std::move(done)](std::error_code e, reply) mutable { done(e, !e); });
  });
}

void segmented_stock::init(long long total) {
  std::error_code ec;
  init(total, ec);
  if (ec) throw_if(ec, ("segmented_stock::init \"" + name_ + "\"").c_str());
}

namespace {

// The sum of the segments, or which segment holds something that is not a count.
struct stock_sum {
  long long sum = 0;
  std::string bad_key;
  std::string bad_value;
};

stock_sum sum_segments(const segmented_stock& s, detail::client_impl& c, std::error_code& ec) {
  std::string p;
  detail::encode_header(p, s.segments() + 1);
  detail::encode_arg(p, std::string_view("MGET"));
  for (std::size_t i = 0; i < s.segments(); ++i) detail::encode_arg(p, s.segment_key(i));
  return detail::sync_call<stock_sum>(c, ec, [&s, c = &c, p = std::move(p)](auto done) mutable {
    c->exec(s.segment_key(0), std::move(p), [&s, done = std::move(done)](std::error_code e, reply r) mutable {
      if (e) return done(e, stock_sum{});
      if (!r.is_array()) return done(errc::bad_reply, stock_sum{});
      stock_sum out;
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        auto& el = r.elements[i];
        if (el.is_nil()) continue;
        long long v = 0;
        auto [q, pe] = std::from_chars(el.str.data(), el.str.data() + el.str.size(), v);
        if (!el.is_string() || pe != std::errc{} || q != el.str.data() + el.str.size() ||
            __builtin_add_overflow(out.sum, v, &out.sum)) {
          // A value someone else wrote: a typed error naming the key, never an exception here.
          out.bad_key = s.segment_key(i);
          out.bad_value = el.str.substr(0, 64);
          return done(errc::bad_reply, std::move(out));
        }
      }
      done({}, std::move(out));
    }, true);
  });
}

}  // namespace

long long segmented_stock::remaining(std::error_code& ec) {
  auto r = sum_segments(*this, *client_, ec);
  return ec ? 0 : r.sum;
}

long long segmented_stock::remaining() {
  std::error_code ec;
  auto r = sum_segments(*this, *client_, ec);
  if (ec == errc::bad_reply && !r.bad_key.empty())
    throw error(ec, "segmented_stock::remaining \"" + name_ + "\": segment key \"" + r.bad_key + "\" holds \"" +
                        r.bad_value + "\", not a count");
  if (ec) throw_if(ec, ("segmented_stock::remaining \"" + name_ + "\"").c_str());
  return r.sum;
}

}  // namespace redlease
