// SPDX-License-Identifier: MIT
#include "runtime/delivery.hpp"

#include <utility>

namespace redlease::detail {

delivery_queue::delivery_queue(std::function<void(std::string_view)> deliver,
                               std::function<void(std::uint64_t)> dropped)
    : deliver_(std::move(deliver)), dropped_(std::move(dropped)) {}

void delivery_queue::push(std::string_view payload, delivery_pool& pool) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return;
    if (q_.size() >= cap) {
      q_.pop_front();
      ++lost_;
    }
    q_.emplace_back(payload);
    if (scheduled_) return;
    scheduled_ = true;
  }
  pool.ready(shared_from_this());
}

void delivery_queue::close() noexcept {
  std::lock_guard<std::mutex> g(mu_);
  closed_ = true;
  q_.clear();
}

bool delivery_queue::deliver_one() {
  std::string m;
  std::uint64_t lost = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (q_.empty() || closed_) {
      scheduled_ = false;
      return false;
    }
    m = std::move(q_.front());
    q_.pop_front();
    lost = std::exchange(lost_, 0);
  }
  if (lost > 0) dropped_(lost);
  deliver_(m);
  std::lock_guard<std::mutex> g(mu_);
  if (!q_.empty() && !closed_) return true;
  scheduled_ = false;
  return false;
}

std::shared_ptr<delivery_pool> delivery_pool::make(std::size_t threads) {
  std::shared_ptr<delivery_pool> p(new delivery_pool());
  for (std::size_t i = 0; i < threads; ++i)
    // Each thread keeps the pool: one left running by stop() (it closed its own client) ends later.
    p->threads_.emplace_back([p] { p->run(); });
  return p;
}

delivery_pool::~delivery_pool() { stop(); }

void delivery_pool::ready(std::shared_ptr<delivery_queue> q) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopped_) return;
    ready_.push_back(std::move(q));
  }
  cv_.notify_one();
}

void delivery_pool::run() {
  for (;;) {
    std::shared_ptr<delivery_queue> q;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [this] { return stopped_ || !ready_.empty(); });
      if (stopped_) return;
      q = std::move(ready_.front());
      ready_.pop_front();
    }
    // One message per turn: a flooded or slow subscription takes its turn with the others.
    if (q->deliver_one()) ready(std::move(q));
  }
}

void delivery_pool::stop(bool join) noexcept {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> g(mu_);
    stopped_ = true;
    ready_.clear();
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) {
    if (!join || t.get_id() == std::this_thread::get_id()) t.detach();
    else if (t.joinable()) t.join();
  }
}

}  // namespace redlease::detail
