// Which IP addresses the service may fetch a model from: public unicast only, unless an
// allow-list (`kiln serve --fetch-allow CIDR,...`) names the address. Refused by default:
// loopback, private (RFC 1918), unique-local (fc00::/7), link-local (169.254/16, fe80::/10, the
// cloud metadata address among them), multicast, shared (100.64/10), unspecified and reserved
// ranges. IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::/96) addresses are judged by the IPv4
// address inside them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/core/status.h"

struct sockaddr;

namespace kiln::server {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 in the first 4

  std::string to_string() const;
  bool operator==(const IpAddress&) const = default;
};

struct Cidr {
  IpAddress network;
  int prefix = 0;
};

// "a.b.c.d" or an IPv6 literal (brackets allowed); nullopt when it is not an address.
std::optional<IpAddress> ip_parse(const std::string& text);
std::optional<IpAddress> ip_from_sockaddr(const sockaddr* address);
// "10.0.0.0/8,::1/128" (a bare address is /32 or /128); the error names the bad entry.
Result<std::vector<Cidr>> cidr_list_parse(const std::string& text);

// Empty when `address` may be fetched from, else why not ("169.254.169.254 is link-local").
std::string address_refusal(const IpAddress& address, const std::vector<Cidr>& allow);

}  // namespace kiln::server
