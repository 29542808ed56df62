// Pushes an OCI image layout to a registry with the distribution protocol, in the one order
// that never leaves a tag on a partial image: layers, then the config, then the manifest by its
// digest, and only then the tag. Each blob is checked first (HEAD: skipped when the registry has
// it), mounted from another repository of the same registry when asked (a registry that does
// not know the blob answers 202 and the upload goes on in that session), or uploaded (POST for
// a session, then one PUT with the digest: Debian's registry does not take a single-POST
// upload). An upload that fails with a connection error or 5xx restarts from a new session,
// with exponential backoff.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "containers/registry/auth.h"
#include "containers/registry/http_client.h"
#include "containers/registry/layout.h"
#include "containers/registry/reference.h"
#include "kernels/core/status.h"

namespace kiln::registry {

struct PushOptions {
  Credentials credentials;
  TlsOptions tls;
  RetryPolicy retry;
  bool plain_http = false;  // http:// instead of https:// (loopback and test registries)
  std::string mount_from;   // a repository of the same registry to mount blobs from ("" for none)
};

enum class BlobOutcome { skipped, mounted, uploaded };
const char* blob_outcome_name(BlobOutcome outcome);

struct BlobPushed {
  std::string role;  // "layer 1/3 (runtime)", "config"
  std::string digest;
  uint64_t size = 0;
  BlobOutcome outcome = BlobOutcome::uploaded;
  double seconds = 0;
  int attempts = 1;
};

struct PushResult {
  std::string reference;  // what was written: "registry/repo:tag" or "registry/repo@digest"
  std::string manifest_digest;
  uint64_t manifest_size = 0;
  std::vector<BlobPushed> blobs;
};

using PushProgress = std::function<void(const BlobPushed&)>;

// Pushes the image of `layout` to `ref`. Errors name the step (blob role and digest, manifest,
// tag), the URL's HTTP status and what the registry said; when one is returned, the tag was not
// written (or not changed).
Result<PushResult> image_push(const LayoutImage& image, const ImageReference& ref, const PushOptions& options,
                              const PushProgress& progress = {});

}  // namespace kiln::registry
