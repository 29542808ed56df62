#include "service/server/address_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace kiln::server {
namespace {

bool in_cidr(const IpAddress& a, const Cidr& c) {
  if (a.v6 != c.network.v6) return false;
  int bits = c.prefix;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a.bytes[i] & mask) != (c.network.bytes[i] & mask)) return false;
  }
  return true;
}

Cidr cidr(const char* address, int prefix) { return {*ip_parse(address), prefix}; }

// The IPv4 address inside an IPv4-mapped or NAT64 IPv6 address, else the address itself.
IpAddress unwrap_v4(const IpAddress& a) {
  static const Cidr mapped = cidr("::ffff:0:0", 96), nat64 = cidr("64:ff9b::", 96);
  if (!a.v6 || !(in_cidr(a, mapped) || in_cidr(a, nat64))) return a;
  IpAddress v4;
  std::memcpy(v4.bytes.data(), a.bytes.data() + 12, 4);
  return v4;
}

struct Refused {
  Cidr range;
  const char* why;
};

const std::vector<Refused>& refused_ranges() {
  static const std::vector<Refused> ranges = {
      {cidr("0.0.0.0", 8), "unspecified (0.0.0.0/8)"},
      {cidr("10.0.0.0", 8), "private (10.0.0.0/8)"},
      {cidr("100.64.0.0", 10), "shared address space (100.64.0.0/10)"},
      {cidr("127.0.0.0", 8), "loopback (127.0.0.0/8)"},
      {cidr("169.254.0.0", 16), "link-local (169.254.0.0/16)"},
      {cidr("172.16.0.0", 12), "private (172.16.0.0/12)"},
      {cidr("192.0.0.0", 24), "IETF protocol assignments (192.0.0.0/24)"},
      {cidr("192.168.0.0", 16), "private (192.168.0.0/16)"},
      {cidr("198.18.0.0", 15), "benchmarking (198.18.0.0/15)"},
      {cidr("224.0.0.0", 4), "multicast (224.0.0.0/4)"},
      {cidr("240.0.0.0", 4), "reserved (240.0.0.0/4)"},
      {cidr("::", 128), "unspecified (::)"},
      {cidr("::1", 128), "loopback (::1)"},
      {cidr("::", 96), "IPv4-compatible (::/96)"},
      {cidr("fc00::", 7), "unique-local (fc00::/7)"},
      {cidr("fe80::", 10), "link-local (fe80::/10)"},
      {cidr("fec0::", 10), "site-local (fec0::/10)"},
      {cidr("ff00::", 8), "multicast (ff00::/8)"},
      {cidr("2001:db8::", 32), "documentation (2001:db8::/32)"},
  };
  return ranges;
}

}  // namespace

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

std::optional<IpAddress> ip_parse(const std::string& text) {
  std::string t = text;
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
  IpAddress a;
  if (inet_pton(AF_INET, t.c_str(), a.bytes.data()) == 1) return a;
  a.v6 = true;
  if (inet_pton(AF_INET6, t.c_str(), a.bytes.data()) == 1) return a;
  return std::nullopt;
}

std::optional<IpAddress> ip_from_sockaddr(const sockaddr* address) {
  IpAddress a;
  if (address->sa_family == AF_INET) {
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, 4);
    return a;
  }
  if (address->sa_family == AF_INET6) {
    a.v6 = true;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, 16);
    return a;
  }
  return std::nullopt;
}

Result<std::vector<Cidr>> cidr_list_parse(const std::string& text) {
  std::vector<Cidr> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t slash = item.find('/');
    auto address = ip_parse(item.substr(0, slash));
    KILN_REQUIRE(address.has_value(), invalid_argument, "'", item, "' is not an address or CIDR range (e.g. 10.1.0.0/16, fd00::/8)");
    const int max_prefix = address->v6 ? 128 : 32;
    int prefix = max_prefix;
    if (slash != std::string::npos) {
      const std::string p = item.substr(slash + 1);
      KILN_REQUIRE(!p.empty() && p.size() <= 3 && p.find_first_not_of("0123456789") == std::string::npos &&
                       std::stoi(p) <= max_prefix,
                   invalid_argument, "'", item, "': the prefix length must be 0 to ", max_prefix);
      prefix = std::stoi(p);
    }
    out.push_back({*address, prefix});
  }
  return out;
}

std::string address_refusal(const IpAddress& address, const std::vector<Cidr>& allow) {
  const IpAddress a = unwrap_v4(address);
  for (const Cidr& c : allow)
    if (in_cidr(a, c) || in_cidr(address, c)) return "";
  for (const Refused& r : refused_ranges())
    if (in_cidr(a, r.range))
      return "address " + address.to_string() + " is " + r.why + " and not in --fetch-allow";
  return "";
}

}  // namespace kiln::server
