// Which addresses a model URL may name: public ones, and those on the allow-list.
#include <filesystem>

#include <catch2/catch.hpp>

#include "service/server/address_policy.h"
#include "service/server/url_fetch.h"

using namespace kiln::server;

namespace {

std::string refusal(const std::string& address, const std::string& allow = "") {
  auto ip = ip_parse(address);
  REQUIRE(ip.has_value());
  auto list = cidr_list_parse(allow);
  REQUIRE(list);
  return address_refusal(*ip, *list);
}

}  // namespace

TEST_CASE("address policy: private, loopback, link-local, multicast and unique-local are refused", "[service][fetch]") {
  for (const char* a : {"10.0.0.1", "127.0.0.1", "127.255.0.9", "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                        "100.64.0.1", "0.0.0.0", "224.0.0.251", "255.255.255.255", "::1", "::", "fe80::1", "fd12:3456::1",
                        "fc00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a9fe:a9fe", "2001:db8::1"}) {
    INFO(a);
    CHECK_FALSE(refusal(a).empty());
  }
  CHECK(refusal("169.254.169.254") == "address 169.254.169.254 is link-local (169.254.0.0/16) and not in --fetch-allow");
  CHECK_THAT(refusal("::ffff:127.0.0.1"), Catch::Contains("loopback"));
}

TEST_CASE("address policy: public addresses pass, the allow-list overrides, also for IPv4-mapped forms", "[service][fetch]") {
  for (const char* a : {"8.8.8.8", "1.1.1.1", "172.32.0.1", "192.169.0.1", "2606:4700::1111", "::ffff:8.8.8.8"}) {
    INFO(a);
    CHECK(refusal(a).empty());
  }
  CHECK(refusal("127.0.0.1", "127.0.0.1/32").empty());
  CHECK(refusal("::ffff:127.0.0.1", "127.0.0.1/32").empty());
  CHECK_FALSE(refusal("127.0.0.2", "127.0.0.1/32").empty());
  CHECK(refusal("10.1.200.3", "10.1.0.0/16,fd00::/8").empty());
  CHECK(refusal("fd00::5", "10.1.0.0/16,fd00::/8").empty());
  CHECK_FALSE(refusal("10.2.0.1", "10.1.0.0/16").empty());
}

TEST_CASE("address policy: bad allow-list entries are named", "[service][fetch]") {
  for (const char* bad : {"10.0.0.0/33", "example.com", "10.0.0.0/", "::1/129", "10.0.0.0/8,,"}) {
    INFO(bad);
    auto r = cidr_list_parse(bad);
    CHECK_FALSE(r);
  }
  CHECK(cidr_list_parse("")->empty());
}

TEST_CASE("url refusal: schemes other than http and https, and literal private hosts", "[service][fetch]") {
  CHECK_THAT(url_refusal("ftp://example.com/x", {}), Catch::Contains("scheme 'ftp'"));
  CHECK_THAT(url_refusal("FILE:///etc/passwd", {}), Catch::Contains("scheme 'file'"));
  CHECK_THAT(url_refusal("gopher://10.0.0.1/", {}), Catch::Contains("scheme 'gopher'"));
  CHECK_THAT(url_refusal("http://[::ffff:169.254.169.254]/", {}), Catch::Contains("link-local"));
  CHECK_THAT(url_refusal("not a url", {}), Catch::Contains("does not parse"));
  CHECK(url_refusal("https://example.com/model.onnx", {}).empty());  // names are checked when connecting
}

TEST_CASE("url fetch: a host name is judged by the address it resolves to, before connecting", "[service][fetch]") {
  const std::string dst = (std::filesystem::temp_directory_path() / "kiln-url-fetch-test.onnx").string();
  // localhost passes the literal check (a name) but resolves to loopback: refused at the socket.
  const kiln::Status st = url_fetch("http://localhost:9/model.onnx", dst, UrlFetchOptions{});
  REQUIRE_FALSE(st);
  CHECK(st.code() == kiln::ErrorCode::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("is loopback"));
  CHECK_FALSE(std::filesystem::exists(dst));
  const kiln::Status scheme = url_fetch("ftp://localhost/model.onnx", dst, UrlFetchOptions{});
  REQUIRE_FALSE(scheme);
  CHECK_THAT(scheme.message(), Catch::Contains("scheme 'ftp'"));
}
