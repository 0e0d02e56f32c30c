// SPDX-License-Identifier: MIT
#include "test_certs.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace redlease::test {
namespace {

// The recipe of docs/topologies.md §4.4, with EC keys (faster than RSA) and `openssl ca` for the
// expired certificate (`openssl x509` cannot back-date one in OpenSSL 3.0). Runs in the directory.
constexpr const char* script = R"sh(
set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }
ca() { key "$1"; openssl req -x509 -new -key "$1.key" -sha256 -days 2 -subj "/CN=$2" -out "$1.crt"; }
# leaf NAME CA CN EXTENSION
leaf() {
  key "$1"
  openssl req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 -sha256 \
    -extfile "$1.ext" -out "$1.crt"
}
both='subjectAltName=DNS:localhost,IP:127.0.0.1'
ca ca redlease-test-ca
ca other-ca redlease-other-ca
leaf server ca localhost "$both"
leaf localhost-only ca localhost 'subjectAltName=DNS:localhost'
leaf cn-only ca localhost 'basicConstraints=CA:FALSE'
leaf san-not-cn ca localhost 'subjectAltName=DNS:elsewhere.example'
leaf other-server other-ca localhost "$both"
leaf client ca client 'extendedKeyUsage=clientAuth'
key expired
openssl req -new -key expired.key -subj /CN=localhost -out expired.csr
mkdir ca-db
: > ca-db/index.txt
echo 1000 > ca-db/serial
printf '%s\n' '[ca]' 'default_ca = test' '[test]' 'database = ca-db/index.txt' 'new_certs_dir = ca-db' \
  'serial = ca-db/serial' 'default_md = sha256' 'policy = any' 'x509_extensions = ext' \
  '[any]' 'commonName = supplied' '[ext]' "$both" > ca.cnf
mkdir ca-dir
cp ca.crt ca-dir/
openssl rehash ca-dir
printf 'test-only\n' > pass.txt  # a pass phrase never goes on a command line, even a test's
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -aes-128-cbc -pass file:pass.txt -out encrypted.key
openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext
)sh";

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool test_certs::available() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

test_certs::test_certs() {
  char tmpl[] = "/tmp/redlease-certs-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error(std::string("test_certs: mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  std::ofstream(dir_ + "/make.sh") << script;
  const std::string cmd = "cd '" + dir_ + "' && sh ./make.sh > make.log 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string out = read_all(dir_ + "/make.log");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw std::runtime_error("test_certs: making the certificates failed (status " + std::to_string(rc) + "):\n" + out);
  }
}

test_certs::~test_certs() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace redlease::test
