#include "service/runtime/serve/v2_router.h"

#include <nlohmann/json.hpp>

#include "service/runtime/serve/v2_protocol.h"

namespace kiln::serve {
namespace {

using json = nlohmann::json;

HttpResponse json_response(int status, std::string body) { return {status, std::move(body), {}}; }
HttpResponse error_response(int status, std::string_view message) { return {status, v2_error_write(message), {}}; }

// The one place where errors become HTTP status codes.
int status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::parse:
    case ErrorCode::invalid_argument:
    case ErrorCode::shape_mismatch:
    case ErrorCode::unsupported:
    case ErrorCode::invalid_graph:
      return 400;
    case ErrorCode::limit_exceeded:
      return 413;
    case ErrorCode::io:
    case ErrorCode::internal:
    case ErrorCode::constraint_not_met:
      return 500;
  }
  return 500;
}

HttpResponse error_response(const Error& error) { return error_response(status_of(error.code), error.message); }

HttpResponse submit_refused(const SubmitResult& refused) {
  switch (refused.outcome) {
    case SubmitOutcome::invalid:
      return error_response(400, refused.message);
    case SubmitOutcome::queue_full:
    case SubmitOutcome::stopped:
    case SubmitOutcome::accepted:
      break;
  }
  HttpResponse res = error_response(503, refused.message);
  res.headers.emplace_back("Retry-After", "1");
  return res;
}

HttpResponse method_not_allowed(const std::string& method, const std::string& path, const char* allowed) {
  HttpResponse res = error_response(405, "method " + method + " is not allowed on " + path + " (use " + allowed + ")");
  res.headers.emplace_back("Allow", allowed);
  return res;
}

std::vector<std::string> path_split(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;  // after the leading '/'
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::vector<V2TensorMetadata> metadata_of(const ModelSignature& sig, const std::vector<TensorSpec>& specs) {
  std::vector<V2TensorMetadata> list;
  for (const TensorSpec& s : specs) list.push_back({s.name, s.dtype, model_shape_public(sig, s)});
  return list;
}

std::string stats_write(const std::string& model, const BatcherStats& s) {
  auto duration = [](uint64_t count, uint64_t ns) { return json{{"count", count}, {"ns", ns}}; };
  const json doc = {
      {"model_stats",
       json::array({{{"name", model},
                     {"version", "1"},
                     {"last_inference", s.last_inference_ms},
                     {"inference_count", s.inference_count},
                     {"execution_count", s.execution_count},
                     {"inference_stats",
                      {{"success", duration(s.requests - s.failed, s.success_ns)},
                       {"fail", duration(s.failed, 0)},
                       {"queue", duration(s.requests, s.queue_ns)},
                       {"compute_infer", duration(s.execution_count, s.compute_ns)}}}}})}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

V2Router::V2Router(ServedModel model, std::string server_version, PostFn post)
    : model_(std::move(model)), server_version_(std::move(server_version)), post_(std::move(post)) {}

void V2Router::handle(const HttpRequest& request, ReplyFn reply) const {
  const std::string path = request.target.substr(0, request.target.find('?'));
  const std::vector<std::string> parts = path.empty() || path[0] != '/' ? std::vector<std::string>{} : path_split(path);
  const bool get = request.method == "GET";
  const auto not_found = [&] { return error_response(404, "unknown path '" + path + "' (see /v2/models/" + model_.name + ")"); };
  if (parts.empty() || parts[0] != "v2") return reply(not_found());
  if (parts.size() == 1) {
    if (!get) return reply(method_not_allowed(request.method, path, "GET"));
    const json doc = {{"name", "kiln-runtime"}, {"version", server_version_}, {"extensions", {"statistics"}}};
    return reply(json_response(200, doc.dump()));
  }
  if (parts[1] == "health" && parts.size() == 3 && (parts[2] == "live" || parts[2] == "ready")) {
    if (!get) return reply(method_not_allowed(request.method, path, "GET"));
    if (parts[2] == "ready" && !ready_.load()) return reply(error_response(503, "the server is shutting down"));
    return reply(json_response(200, "{}"));
  }
  if (parts[1] != "models" || parts.size() < 3) return reply(not_found());
  if (parts[2] != model_.name)
    return reply(error_response(404, "unknown model '" + parts[2] + "' (this server serves '" + model_.name + "')"));
  size_t rest = 3;  // /v2/models/NAME[/versions/V][/ACTION]: the one version is "1"
  if (parts.size() >= 5 && parts[3] == "versions") {
    if (parts[4] != "1")
      return reply(error_response(404, "model '" + model_.name + "' has no version '" + parts[4] + "' (it has version '1')"));
    rest = 5;
  }
  if (parts.size() > rest + 1) return reply(not_found());
  const std::string action = parts.size() == rest + 1 ? parts[rest] : "";
  if (action == "infer") {
    if (request.method != "POST") return reply(method_not_allowed(request.method, path, "POST"));
    return infer(request, std::move(reply));
  }
  if (action != "" && action != "ready" && action != "stats") return reply(not_found());
  if (!get) return reply(method_not_allowed(request.method, path, "GET"));
  if (action == "ready") {
    if (!ready_.load()) return reply(error_response(503, "the server is shutting down"));
    return reply(json_response(200, "{}"));
  }
  if (action == "stats") return reply(json_response(200, stats_write(model_.name, model_.batcher->stats())));
  return reply(json_response(200, v2_model_metadata_write(model_.name, metadata_of(model_.signature, model_.signature.inputs),
                                                          metadata_of(model_.signature, model_.signature.outputs))));
}

void V2Router::infer(const HttpRequest& request, ReplyFn reply) const {
  auto parsed = v2_infer_request_parse(request.body);
  if (!parsed) return reply(error_response(parsed.error()));
  auto picked = model_outputs_select(model_.signature, parsed->outputs);
  if (!picked) return reply(error_response(picked.error()));
  auto matched = model_inputs_match(model_.signature, std::move(parsed->inputs));
  if (!matched) return reply(error_response(matched.error()));
  std::vector<std::string> names;
  for (size_t i : *picked) names.push_back(model_.signature.outputs[i].name);
  auto done = [post = post_, reply, picked = *picked, names = std::move(names), model = model_.name,
               id = parsed->id](Result<std::vector<Tensor>> outputs) {
    post([reply, picked, names, model, id, outputs = std::move(outputs)] {
      if (!outputs) return reply(error_response(500, "inference failed: " + outputs.error().message));
      NamedTensors named;
      for (size_t k = 0; k < picked.size(); ++k) {
        if (picked[k] >= outputs->size()) return reply(error_response(500, "the engine returned fewer outputs than the model declares"));
        named.emplace_back(names[k], (*outputs)[picked[k]]);
      }
      reply(json_response(200, v2_infer_response_write(model, id, named)));
    });
  };
  const SubmitResult submitted = model_.batcher->submit(std::move(matched->tensors), std::move(done));
  if (!submitted.accepted()) reply(submit_refused(submitted));
}

}  // namespace kiln::serve
