#include "service/server/jobs_router.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "containers/oci/digest.h"
#include "service/server/api_error.h"
#include "service/server/job_json_body.h"
#include "service/server/multipart.h"
#include "service/server/report_html.h"
#include "service/server/web_router.h"
#include "service/server/url_fetch.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using serve::HttpRequest;
using serve::HttpResponse;

HttpResponse json_response(int status, const json& body) { return api_json(status, body); }

HttpResponse error_response(int status, const std::string& code, const std::string& message, json details = nullptr) {
  json e = {{"code", code}, {"message", message}};
  if (!details.is_null()) e["details"] = std::move(details);
  return json_response(status, {{"error", e}});
}

HttpResponse text_response(int status, std::string body, const std::string& type = "text/plain; charset=utf-8") {
  return {status, std::move(body), {{"Content-Type", type}}};
}

// Percent-decoding for query values (paths are matched undecoded: ids and names are plain).
std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> query_parse(const std::string& query) {
  std::map<std::string, std::string> out;
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    std::string_view item = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    const size_t eq = item.find('=');
    out[url_decode(item.substr(0, eq))] = eq == std::string_view::npos ? "" : url_decode(item.substr(eq + 1));
  }
  return out;
}

// openapi JobId: ^[A-Za-z0-9_-]+$, at most 64; artifact names: ^[A-Za-z0-9_][A-Za-z0-9._-]*$, at most 255.
bool matches_id_pattern(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}
bool matches_artifact_pattern(const std::string& s) {
  if (s.empty() || s.size() > 255 || s[0] == '.' || s[0] == '-') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

json job_links(const std::string& id) {
  const std::string self = "/v1/jobs/" + id;
  return {{"self", self}, {"events", self + "/events"}, {"report", self + "/report"}, {"artifacts", self + "/artifacts"}};
}

json job_json(const jobs::JobRecord& j) {
  json out = {{"id", j.id}, {"name", j.name}, {"state", j.state}};
  if (!j.stage.empty()) out["stage"] = j.stage;
  out["progress"] = j.progress;
  out["created_at"] = j.created_at;
  if (!j.started_at.empty()) out["started_at"] = j.started_at;
  if (!j.finished_at.empty()) out["finished_at"] = j.finished_at;
  json stages = json::array();
  for (const jobs::StageRecord& s : j.stages) {
    json st = {{"name", s.name}, {"state", s.state}};
    if (!s.started_at.empty()) st["started_at"] = s.started_at;
    if (!s.finished_at.empty()) {
      st["finished_at"] = s.finished_at;
      st["seconds"] = s.seconds;
    }
    if (!s.message.empty()) st["message"] = s.message;
    stages.push_back(std::move(st));
  }
  out["stages"] = std::move(stages);
  if (!j.error.empty()) out["error"] = j.error;
  out["links"] = job_links(j.id);
  return out;
}

HttpResponse store_error(const Error& e) { return error_response(500, "internal", e.message); }

// A document part's errors as openapi FieldErrors; the status follows the worst kind.
HttpResponse document_errors(const std::string& part, const std::vector<api::Error>& errors) {
  json details = json::array();
  int status = 422;
  std::string code = "invalid";
  for (const api::Error& e : errors) {
    json d = {{"part", part}, {"pointer", e.pointer}};
    if (e.line > 0) d["line"] = e.line;
    if (e.column > 0) d["column"] = e.column;
    d["message"] = e.message;
    details.push_back(std::move(d));
    if (e.code == api::ErrorCode::syntax && status == 422) status = 400, code = "syntax";
    if (e.code == api::ErrorCode::limit_exceeded) status = 413, code = "limit_exceeded";
  }
  const std::string first = errors.empty() ? "" : errors.front().to_string();
  const std::string what = status == 400 ? " is not valid YAML or JSON: " : status == 413 ? " exceeds a limit: " : " is invalid: ";
  return error_response(status, code, "part '" + part + "'" + what + first, std::move(details));
}

// The varint at `pos`; false when truncated or longer than 10 bytes.
bool varint_read(std::string_view b, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 70 && pos < b.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(b[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

Status file_write(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  KILN_REQUIRE(out, io, "cannot write '", path.string(), "'");
  return Status::ok();
}

// A job's events are derived from its stored state in a fixed order, so their ids are stable
// and Last-Event-ID resumes exactly: stage i started = 2i+1, stage i finished = 2i+2, done =
// 2n+1. Each poll reads the job and sends the events with ids beyond the last one sent.
std::vector<std::pair<int64_t, std::string>> job_events_of(const jobs::JobRecord& j) {
  std::vector<std::pair<int64_t, std::string>> out;
  auto event = [&](int64_t id, const char* type, json data) {
    out.emplace_back(id, "id: " + std::to_string(id) + "\nevent: " + type + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
  };
  const int64_t n = static_cast<int64_t>(j.stages.size());
  for (int64_t i = 0; i < n; ++i) {
    const jobs::StageRecord& s = j.stages[static_cast<size_t>(i)];
    if (s.state == "pending") continue;
    if (!s.started_at.empty())
      event(2 * i + 1, "stage", {{"type", "stage"}, {"job", j.id}, {"stage", s.name}, {"state", "running"}, {"time", s.started_at}});
    if (s.state != "running") {
      json d = {{"type", "stage"}, {"job", j.id}, {"stage", s.name}, {"state", s.state}};
      if (!s.message.empty()) d["message"] = s.message;
      if (!s.finished_at.empty()) d["time"] = s.finished_at;
      event(2 * i + 2, "stage", std::move(d));
    }
  }
  if (jobs::job_state_is_final(j.state)) {
    json d = {{"type", "done"}, {"job", j.id}, {"state", j.state}, {"progress", j.progress}};
    if (!j.stage.empty()) d["stage"] = j.stage;
    if (!j.error.empty()) d["message"] = j.error;
    if (!j.finished_at.empty()) d["time"] = j.finished_at;
    event(2 * n + 1, "done", std::move(d));
  }
  return out;
}

// The running stage's log, followed: each new line becomes a `log` event. They carry no id (they
// are not part of the stored state): a client that reconnects gets the running stage's log again
// from its start, and Last-Event-ID still resumes the stage events exactly.
struct LogTail {
  std::string stage;  // empty: none followed
  uint64_t offset = 0;
};

constexpr size_t kLogBytesPerPoll = 64 * 1024;
constexpr size_t kLogLineChars = 1000;

// New lines of the followed stage's log as events; `all`: the stage ended, send a last partial line too.
std::string log_events(const std::string& folder, const std::string& job, LogTail& tail, bool all) {
  std::ifstream in(folder + "/" + tail.stage + ".log", std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(tail.offset));
  std::string chunk(kLogBytesPerPoll, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t end = chunk.find('\n', start);
    const bool last_partial = end == std::string::npos;
    if (last_partial && (!all || start == chunk.size())) break;
    if (last_partial) end = chunk.size();
    std::string line = chunk.substr(start, end - start);
    start = std::min(end + 1, chunk.size());
    tail.offset += line.size() + (last_partial ? 0 : 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.size() > kLogLineChars) line = line.substr(0, kLogLineChars) + "...";
    const json d = {{"type", "log"}, {"job", job}, {"stage", tail.stage}, {"message", line}};
    out += "event: log\ndata: " + d.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  }
  return out;
}

HttpResponse job_events(jobs::JobStore& store, const std::string& id, int64_t after, const std::string& folder) {
  struct State {
    int64_t last_sent;
    LogTail log;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>(State{after, {}});
  HttpResponse r{200, "", {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}}, nullptr};
  r.stream = [&store, id, folder, state]() -> serve::StreamPoll {
    serve::StreamPoll poll;
    auto job = store.job_get(id);
    if (!job || !job->has_value()) {
      poll.data = "event: error\ndata: {\"message\": \"the job store cannot be read\"}\n\n";
      poll.done = true;
      return poll;
    }
    const jobs::JobRecord& j = **job;
    const auto running = std::find_if(j.stages.begin(), j.stages.end(), [](const jobs::StageRecord& s) { return s.state == "running"; });
    // The followed stage's last lines come before its "finished" event.
    if (!state->log.stage.empty()) {
      const bool ended = running == j.stages.end() || running->name != state->log.stage;
      poll.data += log_events(folder, id, state->log, ended);
      if (ended) state->log = {};
    }
    for (const auto& [event_id, text] : job_events_of(j)) {
      if (event_id <= state->last_sent) continue;
      poll.data += text;
      state->last_sent = event_id;
    }
    if (state->log.stage.empty() && running != j.stages.end()) {
      state->log.stage = running->name;
      poll.data += log_events(folder, id, state->log, false);
    }
    poll.done = jobs::job_state_is_final(j.state);
    // A comment now and then, so that a client that went away is noticed by a failing write.
    const auto now = std::chrono::steady_clock::now();
    if (poll.data.empty() && now - state->last_write > std::chrono::seconds(15)) poll.data = ": keep-alive\n\n";
    if (!poll.data.empty()) state->last_write = now;
    return poll;
  };
  return r;
}

}  // namespace

std::string onnx_model_check(std::string_view b) {
  if (b.empty()) return "the model part is empty";
  size_t pos = 0;
  bool graph = false;
  while (pos < b.size()) {
    uint64_t key = 0;
    if (!varint_read(b, pos, key)) return "not a protobuf message (truncated field key)";
    const uint64_t field = key >> 3, wire = key & 7;
    // ModelProto's fields are 1..25 (ir_version .. training_info, functions).
    if (field < 1 || field > 32) return "not an ONNX ModelProto (field number " + std::to_string(field) + ")";
    uint64_t v = 0;
    switch (wire) {
      case 0:
        if (!varint_read(b, pos, v)) return "not a protobuf message (truncated varint)";
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2:
        if (!varint_read(b, pos, v) || v > b.size() - pos) return "not a protobuf message (a field runs past the end)";
        pos += v;
        if (field == 7) graph = true;
        break;
      default:
        return "not a protobuf message (wire type " + std::to_string(wire) + ")";
    }
    if (pos > b.size()) return "not a protobuf message (truncated)";
  }
  if (!graph) return "not an ONNX model: no graph";
  return "";
}

namespace {

enum class PartLimit { document, model, data };

struct PartRule {
  const char* name;
  PartLimit limit;
  const char* file;  // in the job's folder
};

const std::vector<PartRule>& part_rules() {
  static const std::vector<PartRule> rules = {{"description", PartLimit::document, "description.yaml"},
                                              {"target", PartLimit::document, "target.yaml"},
                                              {"model", PartLimit::model, "model.onnx"},
                                              {"calibration", PartLimit::data, "calibration.npz"},
                                              {"validation", PartLimit::data, "validation.npz"}};
  return rules;
}

}  // namespace

JobsRouter::JobsRouter(jobs::JobStore& store, jobs::JobRunner& runner, std::string data_dir, JobsRouterLimits limits)
    : store_(store), runner_(runner), data_dir_(std::move(data_dir)), limits_(limits) {}

HttpResponse JobsRouter::handle(const HttpRequest& request, const Caller& caller) const {
  const size_t qmark = request.target.find('?');
  const std::string path = request.target.substr(0, qmark);
  const std::string query = qmark == std::string::npos ? "" : request.target.substr(qmark + 1);
  const std::string& method = request.method;
  auto only = [&](std::initializer_list<const char*> methods) -> std::optional<HttpResponse> {
    for (const char* m : methods)
      if (method == m) return std::nullopt;
    std::string allow;
    for (const char* m : methods) allow += (allow.empty() ? "" : ", ") + std::string(m);
    HttpResponse r = error_response(405, "bad_request", method + " is not allowed on " + path + " (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    return r;
  };
  if (path == "/healthz") {
    if (auto r = only({"GET", "HEAD"})) return *r;
    return text_response(200, "ok\n");
  }
  if (path == "/readyz") {
    if (auto r = only({"GET", "HEAD"})) return *r;
    return ready();
  }
  if (path == "/metrics") {
    if (auto r = only({"GET"})) return *r;
    return metrics();
  }
  if (path == "/v1/jobs") {
    if (auto r = only({"GET", "POST"})) return *r;
    return method == "POST" ? job_submit(request, caller) : job_list(query, caller);
  }
  const std::string prefix = "/v1/jobs/";
  if (path.compare(0, prefix.size(), prefix) == 0) return job_route(request, path.substr(prefix.size()), query, caller);
  return error_response(404, "not_found", "no endpoint " + path + " (see api/openapi.yaml)");
}

HttpResponse JobsRouter::ready() const {
  auto counts = store_.job_counts();
  if (!counts) return text_response(503, "job store unavailable: " + counts.error().message + "\n");
  if (!ready_.load()) return text_response(503, "stopping\n");
  if (!runner_.running()) return text_response(503, "workers not running\n");
  if ((*counts)["queued"] >= limits_.max_queued_jobs) return text_response(503, "job queue full\n");
  return text_response(200, "ready\n");
}

HttpResponse JobsRouter::metrics() const {
  auto counts = store_.job_counts();
  if (!counts) return store_error(counts.error());
  std::ostringstream out;
  out << "# HELP kiln_jobs Jobs in the store by state.\n# TYPE kiln_jobs gauge\n";
  for (const auto& [state, n] : *counts) out << "kiln_jobs{state=\"" << state << "\"} " << n << '\n';
  out << "# HELP kiln_workers Job worker threads.\n# TYPE kiln_workers gauge\nkiln_workers " << runner_.workers() << '\n';
  out << "# HELP kiln_workers_busy Workers running a job.\n# TYPE kiln_workers_busy gauge\nkiln_workers_busy "
      << runner_.busy() << '\n';
  return text_response(200, out.str(), "text/plain; version=0.0.4");
}

HttpResponse JobsRouter::job_list(const std::string& query, const Caller& caller) const {
  jobs::JobListQuery q;
  if (!caller.sees_all()) q.owner = caller.id;
  for (const auto& [key, value] : query_parse(query)) {
    if (key == "state") {
      bool known = false;
      for (const char* s : jobs::kJobStates) known = known || value == s;
      if (!known)
        return error_response(400, "bad_request", "query parameter 'state': expected queued, running, succeeded, failed or cancelled, got '" +
                                                      value.substr(0, 64) + "'");
      q.state = value;
    } else if (key == "limit") {
      int limit = 0;
      try {
        size_t used = 0;
        limit = std::stoi(value, &used);
        if (used != value.size()) limit = 0;
      } catch (const std::exception&) {
        limit = 0;
      }
      if (limit < 1 || limit > 1000)
        return error_response(400, "bad_request", "query parameter 'limit': expected an integer from 1 to 1000, got '" + value.substr(0, 64) + "'");
      q.limit = limit;
    } else if (key == "cursor") {
      if (!jobs::job_id_valid(value))
        return error_response(400, "bad_request", "query parameter 'cursor': not a next_cursor this server returned");
      q.cursor = value;
    } else {
      return error_response(400, "bad_request", "unknown query parameter '" + key.substr(0, 64) + "' (known: state, limit, cursor)");
    }
  }
  auto list = store_.job_list(q);
  if (!list) return store_error(list.error());
  json jobs = json::array();
  for (const jobs::JobRecord& j : *list) jobs.push_back(job_json(j));
  json out = {{"jobs", std::move(jobs)}};
  if (static_cast<int>(list->size()) == q.limit) out["next_cursor"] = list->back().id;
  return json_response(200, out);
}

HttpResponse JobsRouter::job_submit(const HttpRequest& request, const Caller& caller) const {
  const std::string content_type = request.header("content-type");
  auto part_limit = [this](const PartRule& r) {
    return r.limit == PartLimit::document ? limits_.max_document_bytes
           : r.limit == PartLimit::model  ? limits_.max_model_bytes
                                          : limits_.max_data_bytes;
  };
  std::map<std::string, std::string_view> got;
  JsonSubmission json_body;  // owns the texts `got` points into for a JSON body
  std::string registered_target;  // owns the registered target's document
  if (content_type.rfind("application/json", 0) == 0) {
    auto parsed = json_submission_parse(request.body);
    if (auto* bad = std::get_if<HttpResponse>(&parsed)) return std::move(*bad);
    json_body = std::move(std::get<JsonSubmission>(parsed));
    if (json_body.model_url.empty())
      return error_response(400, "bad_request", "a JSON body references the model by URL: description.model.url is required",
                            json::array({{{"part", "description"}, {"pointer", "/model/url"}, {"message", "required"}}}));
    if (std::string why = url_refusal(json_body.model_url, fetch_allow_); !why.empty())
      return error_response(400, "bad_request", why,
                            json::array({{{"part", "description"}, {"pointer", "/model/url"}, {"message", why}}}));
    for (const auto& [name, text] : {std::pair{"description", &json_body.description}, {"target", &json_body.target}})
      if (text->size() > limits_.max_document_bytes)
        return error_response(413, "limit_exceeded", std::string("field '") + name + "' has " + std::to_string(text->size()) +
                                                         " bytes as JSON; the limit is " + std::to_string(limits_.max_document_bytes));
    got["description"] = json_body.description;
    if (!json_body.target.empty()) got["target"] = json_body.target;
  } else {
    auto boundary = multipart_boundary(content_type);
    if (!boundary)
      return error_response(boundary.error().code == ErrorCode::unsupported ? 415 : 400,
                            boundary.error().code == ErrorCode::unsupported ? "unsupported_media_type" : "bad_request",
                            boundary.error().message);
    auto parts = multipart_parse(request.body, *boundary);
    if (!parts) return error_response(400, "bad_request", parts.error().message);
    for (const MultipartPart& p : *parts) {
      const PartRule* rule = nullptr;
      for (const PartRule& r : part_rules())
        if (p.name == r.name) rule = &r;
      if (!rule)
        return error_response(400, "bad_request", "unknown part '" + p.name.substr(0, 64) +
                                                      "' (expected description, target, model, calibration, validation)",
                              json::array({{{"part", p.name.substr(0, 64)}, {"message", "unknown part"}}}));
      if (got.count(p.name)) return error_response(400, "bad_request", "part '" + p.name + "' appears twice");
      if (p.body.size() > part_limit(*rule))
        return error_response(413, "limit_exceeded", "part '" + p.name + "' has " + std::to_string(p.body.size()) +
                                                         " bytes; the limit is " + std::to_string(part_limit(*rule)) + " bytes");
      got[p.name] = p.body;
    }
  }

  const std::string key = request.header("idempotency-key");
  if (key.size() > 255) return error_response(400, "bad_request", "header Idempotency-Key: longer than 255 characters");
  if (!got.count("description"))
    return error_response(400, "bad_request", "missing part 'description'",
                          json::array({{{"part", "description"}, {"message", "required"}}}));

  auto app = api::application_parse(got["description"], "description");
  if (!app) return document_errors("description", app.errors());
  std::string model_url;
  if (got.count("model")) {
    if (std::string why = onnx_model_check(got["model"]); !why.empty())
      return error_response(415, "unsupported_media_type", "part 'model': " + why,
                            json::array({{{"part", "model"}, {"message", why}}}));
  } else if (!app->model.url.empty()) {
    if (std::string why = url_refusal(app->model.url, fetch_allow_); !why.empty())
      return error_response(400, "bad_request", why,
                            json::array({{{"part", "description"}, {"pointer", "/model/url"}, {"message", why}}}));
    model_url = app->model.url;
  } else {
    return error_response(400, "bad_request", "missing part 'model' (or give model.url in the description)",
                          json::array({{{"part", "model"}, {"message", "required"}}}));
  }
  if (!got.count("target")) {
    if (app->target.empty())
      return error_response(400, "bad_request",
                            "missing part 'target' (or name a registered target in the description's 'target')",
                            json::array({{{"part", "target"}, {"message", "required"}}}));
    auto registered = store_.target_get(app->target);
    if (!registered) return store_error(registered.error());
    if (!registered->has_value())
      return error_response(422, "invalid", "the description names target '" + app->target + "', which is not registered (GET /v1/targets)",
                            json::array({{{"part", "description"}, {"pointer", "/target"}, {"message", "no registered target '" + app->target + "'"}}}));
    registered_target = (*registered)->document;
    got["target"] = registered_target;
  }
  auto target = api::target_parse(got["target"], "target");
  if (!target) return document_errors("target", target.errors());

  auto counts = store_.job_counts();
  if (!counts) return store_error(counts.error());
  if ((*counts)["queued"] >= limits_.max_queued_jobs) {
    HttpResponse r = error_response(503, "busy", "the job queue is full (" + std::to_string(limits_.max_queued_jobs) + " queued jobs)");
    r.headers.emplace_back("Retry-After", "30");
    return r;
  }

  // The body hash of an idempotent request covers the parts, not the multipart framing (whose
  // boundary a client may choose anew on a retry).
  oci::Sha256 hash;
  for (const auto& [name, bytes] : got) {
    const std::string header = name + ":" + std::to_string(bytes.size()) + "\n";
    hash.update({reinterpret_cast<const uint8_t*>(header.data()), header.size()});
    hash.update({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  }
  const std::string body_sha = hash.hex();

  jobs::JobRecord job;
  job.id = jobs::job_id_new();
  job.name = app->name;
  job.owner = caller.id;
  const fs::path dir = jobs::job_dir(data_dir_, job.id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return error_response(500, "internal", "cannot create the job's directory: " + ec.message());
  for (const PartRule& r : part_rules()) {
    if (!got.count(r.name)) continue;
    if (Status st = file_write(dir / r.file, got[r.name]); !st) {
      fs::remove_all(dir, ec);
      return error_response(500, "internal", st.message());
    }
  }
  std::vector<std::string> stages = jobs::job_stage_names();
  if (!model_url.empty()) stages.insert(stages.begin(), jobs::kFetchStage);  // reads model.url from description.yaml
  // Keys are per owner: one caller's key never finds (or reveals) another's job.
  const std::string owner_key = key.empty() ? "" : caller.id + "/" + key;
  auto created = store_.job_create(job, stages, owner_key, body_sha);
  if (!created || !created->created) fs::remove_all(dir, ec);
  if (!created) return store_error(created.error());
  if (created->conflict)
    return error_response(409, "conflict", "Idempotency-Key '" + key.substr(0, 64) + "' was used with a different body (job " + created->id + ")");
  auto stored = store_.job_get(created->id);
  if (!stored || !stored->has_value()) return error_response(500, "internal", "the job just created is missing");
  if (created->created) runner_.notify();
  HttpResponse r = json_response(created->created ? 202 : 200,
                                 {{"id", created->id}, {"state", (*stored)->state}, {"links", job_links(created->id)}});
  r.headers.emplace_back("Location", "/v1/jobs/" + created->id);
  return r;
}

HttpResponse JobsRouter::job_route(const HttpRequest& request, const std::string& rest, const std::string& query,
                                   const Caller& caller) const {
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string sub = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!matches_id_pattern(id))
    return error_response(400, "bad_request", "path parameter 'id': expected 1 to 64 of A-Z a-z 0-9 _ -");
  if (!jobs::job_id_valid(id)) return error_response(404, "not_found", "no job '" + id + "'");
  auto job = store_.job_get(id);
  if (!job) return store_error(job.error());
  // Another owner's job is answered exactly like a job that does not exist.
  if (!job->has_value() || !caller.sees_owner((*job)->owner)) return error_response(404, "not_found", "no job '" + id + "'");
  const std::string& method = request.method;
  auto not_allowed = [&](const char* allow) {
    HttpResponse r = error_response(405, "bad_request", method + " is not allowed here (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    return r;
  };

  if (sub.empty()) {
    if (method == "GET") return json_response(200, job_json(**job));
    if (method != "DELETE") return not_allowed("GET, DELETE");
    auto cancelled = runner_.cancel(id);
    if (!cancelled) return store_error(cancelled.error());
    auto now = store_.job_get(id);
    if (!now || !now->has_value()) return error_response(500, "internal", "the job vanished");
    return json_response(200, job_json(**now));
  }
  if (method != "GET") return not_allowed("GET");
  auto artifacts = store_.artifacts_list(id);
  if (!artifacts) return store_error(artifacts.error());
  auto file_response = [&](const jobs::ArtifactRecord& a, const std::string& type) {
    std::ifstream in(fs::path(jobs::job_dir(data_dir_, id)) / a.path, std::ios::binary);
    if (!in) return error_response(404, "not_found", "artifact '" + a.name + "' is recorded but its file is gone");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return HttpResponse{200, bytes.str(), {{"Content-Type", type}, {"ETag", "\"" + a.sha256 + "\""}}};
  };
  if (sub == "report") {
    std::string format = query_parse(query)["format"];
    if (format.empty()) format = request.header("accept").rfind("text/html", 0) == 0 ? "html" : "json";
    if (format != "json" && format != "html")
      return error_response(400, "bad_request", "query parameter 'format': expected json or html");
    for (const jobs::ArtifactRecord& a : *artifacts) {
      if (a.kind != "report_json") continue;
      HttpResponse r = file_response(a, "application/json");
      if (format == "json" || r.status != 200) return r;
      r = {200, report_html_render(**job, r.body), {{"Content-Type", "text/html; charset=utf-8"}, {"Cache-Control", "no-cache"}}};
      web_security_headers_add(r);
      return r;
    }
    return error_response(409, "conflict", "job '" + id + "' has no report yet (state " + (*job)->state + ")");
  }
  if (sub == "artifacts") {
    json list = json::array();
    for (const jobs::ArtifactRecord& a : *artifacts)
      list.push_back({{"name", a.name}, {"kind", a.kind}, {"bytes", a.bytes}, {"sha256", a.sha256},
                      {"url", "/v1/jobs/" + id + "/artifacts/" + a.name}});
    return json_response(200, {{"artifacts", list}});
  }
  const std::string artifacts_prefix = "artifacts/";
  if (sub.compare(0, artifacts_prefix.size(), artifacts_prefix) == 0) {
    const std::string name = sub.substr(artifacts_prefix.size());
    if (!matches_artifact_pattern(name))
      return error_response(400, "bad_request", "path parameter 'name': expected an artifact name as listed (no path separators, no leading dot)");
    for (const jobs::ArtifactRecord& a : *artifacts)
      if (a.name == name) return file_response(a, "application/octet-stream");
    return error_response(404, "not_found", "job '" + id + "' has no artifact '" + name + "'");
  }
  if (sub == "events") {
    const std::string last = request.header("last-event-id");
    int64_t after = 0;
    if (!last.empty()) {
      if (last.size() > 9 || last.find_first_not_of("0123456789") != std::string::npos)
        return error_response(400, "bad_request", "header Last-Event-ID: expected an event id this server sent");
      after = std::stoll(last);
    }
    return job_events(store_, id, after, jobs::job_dir(data_dir_, id));
  }
  return error_response(404, "not_found", "no endpoint /v1/jobs/{id}/" + sub.substr(0, 64));
}

}  // namespace kiln::server
