// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdlib>

#include "commands.hpp"

namespace redlease::cli {

std::string default_url() {
  const char* env = std::getenv("REDLEASE_URL");
  return env && *env ? env : "redis://127.0.0.1:6379";
}

config make_config(const std::string& url) {
  auto c = config::from_url(url);
  if (const char* pw = std::getenv("REDLEASE_PASSWORD"); pw && *pw) c.password = pw;
  c.client_name = "redlease-cli";
  return c;
}

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text) {
  if (text == "0") return std::chrono::milliseconds(0);
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i == text.size()) return std::nullopt;
  std::string number = text.substr(0, i), unit = text.substr(i);
  if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
  double v = std::strtod(number.c_str(), nullptr);
  double factor;
  if (unit == "ms") factor = 1;
  else if (unit == "s") factor = 1000;
  else if (unit == "m") factor = 60'000;
  else if (unit == "h") factor = 3'600'000;
  else return std::nullopt;
  double msv = v * factor;
  if (!std::isfinite(msv) || msv < 0 || msv > 1e12) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(std::llround(msv)));
}

CLI::Validator duration_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return parse_duration(s) ? std::string{} : "invalid duration '" + s + "' (use e.g. 250ms, 5s, 2m, 1h)";
      },
      "DURATION");
}

}  // namespace redlease::cli
