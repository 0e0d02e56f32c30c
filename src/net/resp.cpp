// SPDX-License-Identifier: MIT
#include "net/resp.hpp"

#include <algorithm>
#include <charconv>

namespace redlease::detail {
namespace {

constexpr std::size_t first_bytes_kept = 64;

}  // namespace

std::string printable_prefix(std::string_view bytes, std::size_t max) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (bytes.size() > max) out += "...";
  return out;
}

bool resp_reader::feed(const char* data, std::size_t n) {
  if (!error_.empty()) return false;
  if (first_.size() < first_bytes_kept) first_.append(data, std::min(n, first_bytes_kept - first_.size()));
  // Drop what was consumed before growing the buffer, so it holds only the unparsed bytes.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= 4096)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
  return true;
}

resp_reader::status resp_reader::fail(std::string why) {
  error_ = std::move(why);
  return status::error;
}

std::string resp_reader::error_text() const {
  if (error_.empty()) return {};
  return "received " + error_ + "; the peer's first bytes: \"" + printable_prefix(first_) + "\"";
}

void resp_reader::reset() {
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  line_scanned_ = 0;
  stack_.clear();
  root_ = reply{};
  bulk_ = nullptr;
  bulk_left_ = 0;
  elements_ = 0;
  first_.clear();
  error_.clear();
}

reply* resp_reader::place() {
  if (stack_.empty()) {
    root_ = reply{};
    return &root_;
  }
  // Grows as the elements arrive; an element's address is only kept while it is the last one (the
  // deepest frame or the bulk in progress), so reallocation of earlier siblings is harmless.
  auto& parent = *stack_.back().node;
  parent.elements.emplace_back();
  return &parent.elements.back();
}

bool resp_reader::complete_value() {
  while (!stack_.empty()) {
    if (--stack_.back().left > 0) return false;
    stack_.pop_back();
  }
  return true;
}

bool resp_reader::parse_length(std::string_view digits, long long& v) const {
  if (digits.empty()) return false;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return ec == std::errc{} && p == digits.data() + digits.size();
}

resp_reader::status resp_reader::next(reply& out) {
  if (!error_.empty()) return status::error;
  for (;;) {
    if (bulk_ != nullptr) {
      // The bulk's bytes go straight into the reply as they arrive, its CRLF last.
      std::size_t avail = buf_.size() - pos_;
      if (bulk_left_ > 2) {
        std::size_t take = std::min(avail, bulk_left_ - 2);
        bulk_->str.append(buf_, pos_, take);
        pos_ += take;
        bulk_left_ -= take;
        avail -= take;
      }
      if (bulk_left_ > 2) return status::incomplete;
      if (avail < 2) return status::incomplete;
      if (buf_[pos_] != '\r' || buf_[pos_ + 1] != '\n') return fail("a bulk string not followed by CRLF");
      pos_ += 2;
      bulk_ = nullptr;
      bulk_left_ = 0;
      if (complete_value()) break;
      continue;
    }
    if (pos_ == buf_.size()) return status::incomplete;
    // The type byte is judged as soon as it arrives: a peer that is not Redis (a TLS alert has no
    // line end at all) is told apart at once, not after a timeout.
    if (std::string_view("+-:$*").find(buf_[pos_]) == std::string_view::npos) return fail("an unknown reply type byte");
    // A line that arrives in pieces is searched from where the last search stopped (less one byte:
    // its CR may have come alone), not from its start each time.
    auto eol = buf_.find("\r\n", pos_ + line_scanned_);
    if (eol == std::string::npos) {
      if (buf_.size() - pos_ > limits_.max_line) return fail("a reply line longer than " + std::to_string(limits_.max_line) + " bytes");
      line_scanned_ = buf_.size() - pos_ - 1;
      return status::incomplete;
    }
    line_scanned_ = 0;
    if (eol - pos_ > limits_.max_line) return fail("a reply line longer than " + std::to_string(limits_.max_line) + " bytes");
    if (eol == pos_) return fail("an empty reply line");
    char type = buf_[pos_];
    std::string_view line(buf_.data() + pos_ + 1, eol - pos_ - 1);
    switch (type) {
      case '+':
      case '-': {
        if (stack_.empty()) elements_ = 0;
        if (++elements_ > limits_.max_elements) return fail("a reply with too many elements");
        reply* r = place();
        r->type = type == '+' ? reply::kind::status : reply::kind::error;
        r->str.assign(line);
        pos_ = eol + 2;
        break;
      }
      case ':': {
        long long v = 0;
        if (!parse_length(line, v)) return fail("an integer reply that is not a number");
        if (stack_.empty()) elements_ = 0;
        if (++elements_ > limits_.max_elements) return fail("a reply with too many elements");
        reply* r = place();
        r->type = reply::kind::integer;
        r->integer = v;
        pos_ = eol + 2;
        break;
      }
      case '$': {
        long long n = 0;
        if (!parse_length(line, n) || n < -1) return fail("a bulk string with an invalid length");
        if (static_cast<unsigned long long>(std::max(n, 0LL)) > limits_.max_bulk)
          return fail("a bulk string of " + std::to_string(n) + " bytes (the limit is " + std::to_string(limits_.max_bulk) + ")");
        if (stack_.empty()) elements_ = 0;
        if (++elements_ > limits_.max_elements) return fail("a reply with too many elements");
        reply* r = place();
        pos_ = eol + 2;
        if (n == -1) {
          r->type = reply::kind::nil;
          break;
        }
        r->type = reply::kind::string;
        bulk_ = r;
        bulk_left_ = static_cast<std::size_t>(n) + 2;
        continue;
      }
      case '*': {
        long long n = 0;
        if (!parse_length(line, n) || n < -1) return fail("an array with an invalid length");
        if (stack_.empty()) elements_ = 0;
        if (++elements_ > limits_.max_elements ||
            static_cast<unsigned long long>(std::max(n, 0LL)) > limits_.max_elements - elements_)
          return fail("an array of " + std::to_string(n) + " elements (the limit is " + std::to_string(limits_.max_elements) + " per reply)");
        if (n > 0 && stack_.size() + 1 > limits_.max_depth)
          return fail("arrays nested deeper than " + std::to_string(limits_.max_depth));
        reply* r = place();
        pos_ = eol + 2;
        if (n == -1) {
          r->type = reply::kind::nil;
          break;
        }
        r->type = reply::kind::array;
        if (n > 0) {
          // A few slots ahead at most: the rest grows as elements actually arrive.
          r->elements.reserve(static_cast<std::size_t>(std::min(n, 8LL)));
          stack_.push_back({r, static_cast<std::size_t>(n)});
          continue;
        }
        break;
      }
      default:
        return fail("an unknown reply type byte");
    }
    if (complete_value()) break;
  }
  out = std::move(root_);
  root_ = reply{};
  return status::reply;
}

}  // namespace redlease::detail
