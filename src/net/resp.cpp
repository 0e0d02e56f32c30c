// SPDX-License-Identifier: MIT
#include "net/resp.hpp"

#include <hiredis/read.h>

#include <charconv>
#include <stdexcept>

namespace redlease::detail {
namespace {

void append_number(std::string& out, long long v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out.append(buf, p);
}

// The object functions build redlease::reply trees directly, so a reply is decoded once, without
// an intermediate redisReply copy. A child lives inside its parent's `elements`, which is sized once
// in create_array and never grows, so the pointer handed back to hiredis stays valid.
reply* slot(const redisReadTask* t) {
  if (t->parent != nullptr) {
    auto* parent = static_cast<reply*>(t->parent->obj);
    return &parent->elements[static_cast<std::size_t>(t->idx)];
  }
  return new reply;
}

void* create_string(const redisReadTask* t, char* s, size_t len) {
  reply* r = slot(t);
  r->type = t->type == REDIS_REPLY_ERROR    ? reply::kind::error
            : t->type == REDIS_REPLY_STATUS ? reply::kind::status
                                            : reply::kind::string;
  r->str.assign(s, len);
  return r;
}
void* create_array(const redisReadTask* t, int n) {
  reply* r = slot(t);
  r->type = reply::kind::array;
  r->elements.resize(static_cast<std::size_t>(n));
  return r;
}
void* create_integer(const redisReadTask* t, long long v) {
  reply* r = slot(t);
  r->type = reply::kind::integer;
  r->integer = v;
  return r;
}
void* create_nil(const redisReadTask* t) {
  reply* r = slot(t);
  r->type = reply::kind::nil;
  return r;
}
void free_object(void* o) { delete static_cast<reply*>(o); }

redisReplyObjectFunctions reply_functions{create_string, create_array, create_integer, create_nil,
                                          free_object};

}  // namespace

void encode_header(std::string& out, std::size_t nargs) {
  out.push_back('*');
  append_number(out, static_cast<long long>(nargs));
  out.append("\r\n", 2);
}

void encode_arg(std::string& out, std::string_view arg) {
  out.push_back('$');
  append_number(out, static_cast<long long>(arg.size()));
  out.append("\r\n", 2);
  out.append(arg);
  out.append("\r\n", 2);
}

void encode_arg(std::string& out, long long value) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  encode_arg(out, std::string_view(buf, static_cast<std::size_t>(p - buf)));
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  encode_header(out, args.size());
  for (auto a : args) encode_arg(out, a);
}

resp_reader::resp_reader() {
  r_ = redisReaderCreateWithFunctions(&reply_functions);
  if (r_ == nullptr) throw std::bad_alloc();
}

resp_reader::~resp_reader() { redisReaderFree(r_); }

bool resp_reader::feed(const char* data, std::size_t n) {
  return redisReaderFeed(r_, data, n) == REDIS_OK;
}

resp_reader::status resp_reader::next(reply& out) {
  void* obj = nullptr;
  if (redisReaderGetReply(r_, &obj) != REDIS_OK) return status::error;
  if (obj == nullptr) return status::incomplete;
  std::unique_ptr<reply> owned(static_cast<reply*>(obj));
  out = std::move(*owned);
  return status::reply;
}

std::string resp_reader::error_text() const { return r_->errstr; }

void resp_reader::reset() {
  redisReader* fresh = redisReaderCreateWithFunctions(&reply_functions);
  if (fresh == nullptr) throw std::bad_alloc();
  redisReaderFree(r_);
  r_ = fresh;
}

}  // namespace redlease::detail
