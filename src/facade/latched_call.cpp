// SPDX-License-Identifier: MIT
#include "facade/latched_call.hpp"

#include "facade/client_impl.hpp"

namespace redlease::detail {
namespace {

struct latched_call {
  std::shared_ptr<client_impl> c;
  std::string key;
  const lua_script* script = nullptr;
  arg_list args;
  int left = 0;  // sendings still allowed
  unique_function<void(std::error_code, reply)> done;
  unique_function<void()> once;
  bool first = true;  // the sending out is the first
};

void send(std::shared_ptr<latched_call> x) {
  --x->left;
  arg_list a = x->args;  // kept whole for the next sending
  const std::string& key = x->key;
  x->c->exec_script(key, *x->script, std::move(a), [x](std::error_code ec, reply r) mutable {
    if (ec && resend_latched(ec) && x->left > 0 && !x->c->closed()) {
      x->first = false;
      return send(std::move(x));
    }
    if (!ec && !r.is_error() && x->first && x->once) x->once();
    x->done(ec, std::move(r));
  });
}

}  // namespace

bool resend_latched(std::error_code ec) noexcept {
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error ||
         ec == errc::connect_failed || ec == errc::connect_timeout;
}

void send_latched(std::shared_ptr<client_impl> c, std::string key, const lua_script& script, arg_list args,
                  int sendings, unique_function<void(std::error_code, reply)> done, unique_function<void()> once) {
  send(std::make_shared<latched_call>(latched_call{std::move(c), std::move(key), &script, std::move(args), sendings,
                                                   std::move(done), std::move(once)}));
}

}  // namespace redlease::detail
