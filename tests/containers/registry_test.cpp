// containers/registry: the pure parts of push (references, WWW-Authenticate challenges, Location
// resolution, error descriptions). The protocol itself runs against a real registry in
// registry_test.sh.
#include <catch2/catch.hpp>

#include "containers/registry/auth.h"
#include "containers/registry/http_client.h"
#include "containers/registry/reference.h"

using namespace kiln::registry;

TEST_CASE("reference_parse splits registry, repository, tag and digest", "[registry]") {
  auto r = reference_parse("127.0.0.1:5000/kiln/fashion-mnist:v1");
  REQUIRE(r);
  CHECK(r->registry == "127.0.0.1:5000");
  CHECK(r->repository == "kiln/fashion-mnist");
  CHECK(r->tag == "v1");
  CHECK(r->to_string() == "127.0.0.1:5000/kiln/fashion-mnist:v1");

  auto latest = reference_parse("localhost/model");
  REQUIRE(latest);
  CHECK(latest->tag == "latest");

  const std::string digest = "sha256:" + std::string(64, 'a');
  auto by_digest = reference_parse("ghcr.io/org/a.b_c/d__e@" + digest);
  REQUIRE(by_digest);
  CHECK(by_digest->repository == "org/a.b_c/d__e");
  CHECK(by_digest->digest == digest);
  CHECK(by_digest->tag.empty());
}

TEST_CASE("reference_parse says which part is wrong", "[registry]") {
  auto no_registry = reference_parse("kiln/model:v1");
  REQUIRE_FALSE(no_registry);
  CHECK_THAT(no_registry.error().message, Catch::Contains("names no registry"));
  auto upper = reference_parse("localhost:5000/Kiln/model");
  REQUIRE_FALSE(upper);
  CHECK_THAT(upper.error().message, Catch::Contains("component 'Kiln'"));
  auto bad_tag = reference_parse("localhost:5000/kiln:-x");
  REQUIRE_FALSE(bad_tag);
  CHECK_THAT(bad_tag.error().message, Catch::Contains("tag '-x'"));
  CHECK_FALSE(reference_parse("localhost:5000/kiln@sha256:abc"));
  CHECK_FALSE(reference_parse("localhost:5000/"));
  CHECK_FALSE(reference_parse(""));
}

TEST_CASE("challenge_parse reads Basic and Bearer challenges", "[registry]") {
  auto c = challenge_parse(R"(Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push")");
  REQUIRE(c.size() == 1);
  CHECK(c[0].scheme == "bearer");
  CHECK(c[0].params["realm"] == "https://auth.example/token");
  CHECK(c[0].params["service"] == "registry.example");
  CHECK(c[0].params["scope"] == "repository:a/b:pull,push");

  auto two = challenge_parse(R"(Basic realm="kiln test", Bearer realm="x",error="invalid_token")");
  REQUIRE(two.size() == 2);
  CHECK(two[0].scheme == "basic");
  CHECK(two[0].params["realm"] == "kiln test");
  CHECK(two[1].params["error"] == "invalid_token");
  CHECK(challenge_parse("").empty());
}

TEST_CASE("basic_authorization encodes user:password", "[registry]") {
  CHECK(basic_authorization({"kiln", "s3cret pass"}) == "Basic a2lsbjpzM2NyZXQgcGFzcw==");
  CHECK(repository_scope("a/b", "pull") == "repository:a/b:pull");
}

TEST_CASE("url_resolve keeps the Location's query string", "[registry]") {
  const std::string post = "http://127.0.0.1:5000/v2/kiln/m/blobs/uploads/";
  auto absolute = url_resolve(post, "http://127.0.0.1:5000/v2/kiln/m/blobs/uploads/u1?_state=abc%3D%3D");
  REQUIRE(absolute);
  CHECK(*absolute == "http://127.0.0.1:5000/v2/kiln/m/blobs/uploads/u1?_state=abc%3D%3D");
  auto relative = url_resolve(post, "/v2/kiln/m/blobs/uploads/u2?_state=xyz");
  REQUIRE(relative);
  CHECK(*relative == "http://127.0.0.1:5000/v2/kiln/m/blobs/uploads/u2?_state=xyz");
  auto other_host = url_resolve(post, "https://storage.example/upload/3");
  REQUIRE(other_host);
  CHECK(*other_host == "https://storage.example/upload/3");

  CHECK(url_query_append("http://h/u?_state=a", "digest", "sha256:ab") == "http://h/u?_state=a&digest=sha256%3Aab");
  CHECK(url_query_append("http://h/u", "digest", "sha256:ab") == "http://h/u?digest=sha256%3Aab");
  CHECK(url_query_append("http://h/u?", "mount", "x") == "http://h/u?mount=x");
}

TEST_CASE("http_status_describe names the status and what the registry said", "[registry]") {
  HttpResponse r;
  r.status = 400;
  r.body = R"({"errors":[{"code":"DIGEST_INVALID","message":"provided digest did not match uploaded content"}]})";
  CHECK(http_status_describe(r) ==
        "400 Bad Request: registry said: DIGEST_INVALID: provided digest did not match uploaded content");
  r.status = 502;
  r.body = "<html>bad gateway</html>\n";
  r.attempts = 4;
  CHECK(http_status_describe(r) == "502 Bad Gateway: registry said: <html>bad gateway</html> (after 4 attempts)");
  CHECK(http_status_retryable(500));
  CHECK(http_status_retryable(429));
  CHECK_FALSE(http_status_retryable(404));
}
