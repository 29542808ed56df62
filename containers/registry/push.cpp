#include "containers/registry/push.h"

#include <chrono>

namespace kiln::registry {
namespace {

using Clock = std::chrono::steady_clock;

std::string short_digest(const std::string& digest) { return digest.substr(0, 7 + 12); }

// One registry and repository: adds the Authorization header it has, and answers a 401 once by
// getting one (Basic or a bearer token for the push's scopes) and resending.
class Session {
 public:
  Session(const ImageReference& ref, const PushOptions& options)
      : http_(options.tls, options.retry), credentials_(options.credentials) {
    base_ = std::string(options.plain_http ? "http://" : "https://") + ref.registry;
    repo_url_ = base_ + "/v2/" + ref.repository;
    scopes_.push_back(repository_scope(ref.repository, "pull,push"));
    if (!options.mount_from.empty()) scopes_.push_back(repository_scope(options.mount_from, "pull"));
  }

  const std::string& base() const { return base_; }
  const std::string& repo_url() const { return repo_url_; }
  HttpClient& http() { return http_; }

  Result<HttpResponse> send(HttpRequest request) {
    const auto plain_headers = request.headers;
    if (!authorization_.empty()) request.headers.push_back("Authorization: " + authorization_);
    KILN_ASSIGN(response, http_.send(request));
    if (response.status != 401) return response;
    const bool had_authorization = !authorization_.empty();
    KILN_ASSIGN(authorization, authorization_for(http_, response, request.url, scopes_, credentials_));
    authorization_ = authorization;
    request.headers = plain_headers;
    request.headers.push_back("Authorization: " + authorization_);
    KILN_ASSIGN(retried, http_.send(request));
    if (retried.status == 401)
      return make_error(ErrorCode::io, request.method, " ", request.url, " answered ", http_status_describe(retried),
                        had_authorization || !credentials_.empty()
                            ? " even with credentials: check the username and password and that they may push here"
                            : "");
    return retried;
  }

 private:
  HttpClient http_;
  Credentials credentials_;
  std::string base_, repo_url_;
  std::vector<std::string> scopes_;
  std::string authorization_;  // "Basic …" or "Bearer …" once the registry asked
};

Error step_error(const std::string& step, const std::string& method, const std::string& url, const HttpResponse& r) {
  return make_error(ErrorCode::io, step, ": ", method, " ", url, " answered ", http_status_describe(r));
}

// Starts an upload session (or mounts): 201 mounted, 202 with the Location to PUT to.
struct Started {
  bool mounted = false;
  std::string location;
};

Result<Started> upload_start(Session& session, const std::string& role, const std::string& digest,
                             const std::string& mount_from) {
  std::string url = session.repo_url() + "/blobs/uploads/";
  if (!mount_from.empty()) url = url_query_append(url_query_append(url, "mount", digest), "from", mount_from);
  KILN_ASSIGN(response, session.send(HttpRequest{.method = "POST", .url = url}));
  if (response.status == 201 && !mount_from.empty()) return Started{true, ""};
  if (response.status != 202) return step_error(role + " " + digest, "POST", url, response);
  const std::string location = response.header("location");
  KILN_REQUIRE(!location.empty(), parse, role, " ", digest, ": POST ", url,
               " answered 202 without a Location to upload to");
  KILN_ASSIGN(resolved, url_resolve(url, location));
  return Started{false, resolved};
}

Result<BlobPushed> blob_push(Session& session, const LayoutImage& image, const oci::Descriptor& blob,
                             const std::string& role, const PushOptions& options) {
  const auto start = Clock::now();
  BlobPushed pushed{role, blob.digest, blob.size, BlobOutcome::uploaded, 0, 1};
  auto done = [&](BlobOutcome outcome) {
    pushed.outcome = outcome;
    pushed.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return pushed;
  };
  const std::string what = role + " " + blob.digest;

  const std::string blob_url = session.repo_url() + "/blobs/" + blob.digest;
  KILN_ASSIGN(head, session.send(HttpRequest{.method = "HEAD", .url = blob_url}));
  if (head.status == 200) return done(BlobOutcome::skipped);
  if (head.status != 404) return step_error(what, "HEAD", blob_url, head);

  const int max_attempts = 1 + std::max(0, options.retry.retries);
  for (int attempt = 0;; ++attempt) {
    pushed.attempts = attempt + 1;
    KILN_ASSIGN(started, upload_start(session, role, blob.digest, options.mount_from));
    if (started.mounted) return done(BlobOutcome::mounted);
    const std::string put_url = url_query_append(started.location, "digest", blob.digest);
    HttpRequest put{.method = "PUT",
                    .url = put_url,
                    .headers = {"Content-Type: application/octet-stream"},
                    .body = {},
                    .body_file = image.blob_path(blob.digest),
                    .body_file_size = blob.size,
                    .retry = false};
    auto response = session.send(put);
    const bool last = attempt + 1 >= max_attempts;
    if (response && response->status == 201) {
      const std::string echoed = response->header("docker-content-digest");
      KILN_REQUIRE(echoed.empty() || echoed == blob.digest, io, what, ": the registry stored it as ", echoed);
      return done(BlobOutcome::uploaded);
    }
    if (response && (!http_status_retryable(response->status) || last)) {
      response->attempts = attempt + 1;
      return step_error(what + " (" + std::to_string(blob.size) + " bytes)", "PUT", put_url, *response);
    }
    if (!response) {
      // Only transport failures are worth another session; auth and file errors are final.
      const bool transport = response.error().message.starts_with("cannot reach");
      if (!transport || last)
        return make_error(ErrorCode::io, what, ": ", response.error().message,
                          attempt > 0 ? " (after " + std::to_string(attempt + 1) + " attempts)" : "");
    }
    session.http().sleep_backoff(attempt);
  }
}

Result<std::string> manifest_put(Session& session, const LayoutImage& image, const std::string& reference,
                                 const std::string& step) {
  const std::string url = session.repo_url() + "/manifests/" + reference;
  HttpRequest request{.method = "PUT", .url = url, .headers = {"Content-Type: " + image.manifest.media_type},
                      .body = image.manifest_bytes};
  KILN_ASSIGN(response, session.send(request));
  if (response.status != 201 && response.status != 200) return step_error(step, "PUT", url, response);
  return response.header("docker-content-digest");
}

}  // namespace

const char* blob_outcome_name(BlobOutcome outcome) {
  switch (outcome) {
    case BlobOutcome::skipped: return "skipped (already there)";
    case BlobOutcome::mounted: return "mounted";
    case BlobOutcome::uploaded: return "uploaded";
  }
  return "?";
}

Result<PushResult> image_push(const LayoutImage& image, const ImageReference& ref, const PushOptions& options,
                              const PushProgress& progress) {
  KILN_REQUIRE(ref.digest.empty() || ref.digest == image.manifest.digest, invalid_argument, "the reference names ",
               ref.digest, " but the layout's image is ", image.manifest.digest);
  Session session(ref, options);
  PushResult result;

  // The version check finds a registry that is down or not a registry before any upload.
  const std::string ping_url = session.base() + "/v2/";
  KILN_ASSIGN(ping, session.send(HttpRequest{.method = "GET", .url = ping_url}));
  KILN_REQUIRE(ping.ok(), io, "GET ", ping_url, " answered ", http_status_describe(ping),
               ping.status == 404 ? " (not an OCI distribution registry)" : "");

  const size_t n = image.layers.size();
  for (size_t i = 0; i < n; ++i) {
    std::string role = "layer " + std::to_string(i + 1) + "/" + std::to_string(n);
    if (auto it = image.layers[i].annotations.find("kiln.layer"); it != image.layers[i].annotations.end())
      role += " (" + it->second + ")";
    KILN_ASSIGN(pushed, blob_push(session, image, image.layers[i], role, options));
    if (progress) progress(pushed);
    result.blobs.push_back(std::move(pushed));
  }
  KILN_ASSIGN(config, blob_push(session, image, image.config, "config", options));
  if (progress) progress(config);
  result.blobs.push_back(std::move(config));

  const std::string& digest = image.manifest.digest;
  KILN_ASSIGN(stored, manifest_put(session, image, digest, "manifest " + digest));
  KILN_REQUIRE(stored.empty() || stored == digest, io, "manifest ", digest, ": the registry stored it as ", stored);
  if (!ref.tag.empty()) {
    KILN_ASSIGN(tagged, manifest_put(session, image, ref.tag, "tag '" + ref.tag + "' (manifest " + short_digest(digest) + "…)"));
    KILN_REQUIRE(tagged.empty() || tagged == digest, io, "tag '", ref.tag, "': the registry stored ", tagged,
                 " instead of ", digest);
  }
  result.reference = ref.to_string();
  result.manifest_digest = digest;
  result.manifest_size = image.manifest_bytes.size();
  return result;
}

}  // namespace kiln::registry
