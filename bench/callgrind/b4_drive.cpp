#include <redlease/client.hpp>
#include <redlease/lock.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <thread>
#include <unistd.h>
using namespace std::chrono_literals;
using namespace redlease;
int main(int argc, char** argv) {
  auto cfg = config::from_url(argv[1]);
  cfg.watchdog_timeout = 3000ms;
  std::size_t n = argc > 2 ? std::stoul(argv[2]) : 1000;
  std::atomic<long long> lost{0};
  client c{cfg};
  c.ping();
  const owner_id owner = c.new_owner();
  std::atomic<std::size_t> next{0};
  std::atomic<int> live{0};
  std::promise<void> done;
  std::function<void()> chain = [&] {
    std::size_t i = next.fetch_add(1);
    if (i >= n) { if (live.fetch_sub(1) == 1) done.set_value(); return; }
    auto l = c.lock("b4drv:" + std::to_string(i));
    l.on_lost([&](const lost_info&) { ++lost; });
    l.async_lock(owner, [&](std::error_code ec) { if (ec) std::fprintf(stderr, "err %s\n", ec.message().c_str()); chain(); });
  };
  live = 1000;
  auto fut = done.get_future();
  for (int w = 0; w < 1000; ++w) chain();
  fut.wait();
  std::printf("%d\n", getpid());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(argc > 3 ? std::stoi(argv[3]) : 14));
  std::fprintf(stderr, "lost %lld\n", lost.load());
}
