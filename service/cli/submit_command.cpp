// kiln submit --server URL [--token T | env KILN_TOKEN] --description D (--target T | --target-name N)
//   --model M [--calibration F] [--validation F] [--idempotency-key K] [--wait] [--download DIR] [--json]
// The CI client of kiln serve (libcurl): uploads a job as multipart, prints its id and URL; with
// --wait follows its event stream (resuming with Last-Event-ID if the connection drops), printing
// one line per stage event, and exits 0 only when the job succeeded; --download DIR (implies
// --wait) saves report.json and every artifact, each checked against the listed SHA-256.
// --target-name sets the description's `target` (a target registered with PUT /v1/targets).
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/document.h"
#include "containers/oci/digest.h"
#include "kernels/core/status.h"
#include "service/cli/commands.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct SubmitOptions {
  std::string server, token, description, target, target_name, model, calibration, validation, idempotency_key, download;
  bool wait = false;
  bool json_output = false;
};

struct Reply {
  long status = 0;
  std::string body;
};

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// One libcurl handle with the token; requests fail with a message naming the server and why.
class Client {
 public:
  Client(std::string server, std::string token) : server_(std::move(server)), token_(std::move(token)) {
    while (!server_.empty() && server_.back() == '/') server_.pop_back();
  }

  const std::string& server() const { return server_; }

  // `prepare` sets the method and body; the body is collected, or streamed to `sink` when set.
  Result<Reply> request(const std::string& path, const std::function<void(CURL*)>& prepare,
                        curl_write_callback sink = nullptr, void* sink_data = nullptr, long timeout_s = 300) {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    KILN_REQUIRE(curl != nullptr, internal, "libcurl failed to start");
    CURL* c = curl.get();
    Reply reply;
    const std::string url = server_ + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "kiln-submit");
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
    auto header_add = [&](const std::string& h) { headers.reset(curl_slist_append(headers.release(), h.c_str())); };
    if (!token_.empty()) header_add("Authorization: Bearer " + token_);
    for (const std::string& h : extra_headers_) header_add(h);
    extra_headers_.clear();
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    if (sink) {
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, sink_data);
    } else {
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
    }
    prepare(c);
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
    if (rc == CURLE_COULDNT_CONNECT)
      return make_error(ErrorCode::io, "cannot connect to ", server_, ": ", error[0] ? error : "connection refused",
                        " (is kiln serve running there?)");
    if (rc == CURLE_COULDNT_RESOLVE_HOST) return make_error(ErrorCode::io, "cannot resolve the host of ", server_);
    if (rc != CURLE_OK && !(sink && rc == CURLE_WRITE_ERROR))
      return make_error(ErrorCode::io, url, ": ", error[0] ? error : curl_easy_strerror(rc));
    return reply;
  }

  void header_next(std::string h) { extra_headers_.push_back(std::move(h)); }

 private:
  std::string server_, token_;
  std::vector<std::string> extra_headers_;
};

// "server answered 422: <message>" and one line per detail, from an openapi Error body.
std::string server_error(const Reply& r) {
  std::ostringstream out;
  out << "the server answered " << r.status;
  const json body = json::parse(r.body, nullptr, false);
  if (!body.is_discarded() && body.contains("error") && body["error"].is_object()) {
    const json& e = body["error"];
    out << ": " << e.value("message", "");
    if (e.contains("details") && e["details"].is_array())
      for (const json& d : e["details"]) {
        out << "\n  ";
        if (d.contains("part")) out << d["part"].get<std::string>() << " ";
        if (d.contains("pointer")) out << d["pointer"].get<std::string>() << (d.contains("line") ? ":" + std::to_string(d["line"].get<int>()) : "") << ": ";
        out << d.value("message", "");
      }
  } else if (!r.body.empty()) {
    out << ": " << r.body.substr(0, 500);
  }
  if (r.status == 401) out << "\n  (pass --token or set KILN_TOKEN; `kiln token create` on the server makes one)";
  return out.str();
}

Result<std::string> file_read(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, option, ": cannot read '", path, "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct EventStream {
  std::string buffer;
  int64_t last_id = 0;
  bool done = false;
  std::string state, message;
  bool quiet = false;  // --json: progress lines go to stderr
};

void event_print(EventStream& es, const std::string& type, const json& d) {
  std::FILE* out = es.quiet ? stderr : stdout;
  if (type == "stage") {
    std::fprintf(out, "  %-9s %s%s%s\n", d.value("stage", "").c_str(), d.value("state", "").c_str(),
                 d.contains("message") ? ": " : "", d.value("message", "").c_str());
  } else if (type == "log") {  // the running stage's own progress lines
    std::fprintf(out, "  %-9s | %s\n", d.value("stage", "").c_str(), d.value("message", "").c_str());
  } else if (type == "done") {
    es.done = true;
    es.state = d.value("state", "");
    es.message = d.value("message", "");
  }
  std::fflush(out);
}

// Parses server-sent events as they arrive (blocks of "field: value" lines ended by a blank line).
size_t on_events(char* data, size_t size, size_t count, void* user) {
  auto* es = static_cast<EventStream*>(user);
  es->buffer.append(data, size * count);
  size_t end;
  while ((end = es->buffer.find("\n\n")) != std::string::npos) {
    const std::string block = es->buffer.substr(0, end);
    es->buffer.erase(0, end + 2);
    std::string type, payload;
    std::istringstream lines(block);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("event: ", 0) == 0) type = line.substr(7);
      else if (line.rfind("data: ", 0) == 0) payload += line.substr(6);
      else if (line.rfind("id: ", 0) == 0) es->last_id = std::atoll(line.c_str() + 4);
    }
    if (type.empty()) continue;  // a keep-alive comment
    const json d = json::parse(payload, nullptr, false);
    if (!d.is_discarded()) event_print(*es, type, d);
  }
  return es->done ? 0 : size * count;  // stop reading once the job is done
}

bool artifact_name_safe(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

size_t on_file_data(char* data, size_t size, size_t count, void* user) {
  auto* out = static_cast<std::ofstream*>(user);
  out->write(data, static_cast<std::streamsize>(size * count));
  return *out ? size * count : 0;
}

Result<std::string> file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot read '", path, "'");
  oci::Sha256 hash;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) hash.update({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(in.gcount())});
  }
  return hash.hex();
}

// Downloads every listed artifact into `dir`, checking each SHA-256; returns the names.
Result<std::vector<std::string>> artifacts_download(Client& client, const std::string& id, const std::string& dir) {
  KILN_ASSIGN(list, client.request("/v1/jobs/" + id + "/artifacts", [](CURL*) {}));
  KILN_REQUIRE(list.status == 200, io, "listing the artifacts: ", server_error(list));
  const json body = json::parse(list.body, nullptr, false);
  KILN_REQUIRE(!body.is_discarded() && body.contains("artifacts") && body["artifacts"].is_array(), parse,
               "the artifact list is not the contract's ArtifactList");
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_REQUIRE(!ec, io, "--download: cannot create '", dir, "': ", ec.message());
  std::vector<std::string> names;
  for (const json& a : body["artifacts"]) {
    const std::string name = a.value("name", ""), sha = a.value("sha256", "");
    KILN_REQUIRE(artifact_name_safe(name), parse, "the server listed an artifact named '", name.substr(0, 64), "', which is not a plain file name");
    const std::string path = (fs::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    KILN_REQUIRE(out, io, "cannot write '", path, "'");
    KILN_ASSIGN(got, client.request("/v1/jobs/" + id + "/artifacts/" + name, [](CURL*) {}, on_file_data, &out, 3600));
    out.close();
    KILN_REQUIRE(got.status == 200, io, "downloading ", name, ": the server answered ", got.status);
    KILN_REQUIRE(out, io, "writing '", path, "' failed");
    KILN_ASSIGN(actual, file_sha256(path));
    KILN_REQUIRE(actual == sha, io, "artifact ", name, ": downloaded bytes have SHA-256 ", actual, ", the server listed ", sha);
    names.push_back(name);
  }
  return names;
}

int run_submit(SubmitOptions opts) {
  if (opts.token.empty())
    if (const char* env = std::getenv("KILN_TOKEN")) opts.token = env;
  if (!opts.download.empty()) opts.wait = true;
  Client client(opts.server, opts.token);

  // The description as sent: unchanged, or with `target` set to --target-name.
  auto description = file_read(opts.description, "--description");
  if (!description) return report_error(description.error().message);
  std::string description_text = *description;
  if (!opts.target_name.empty()) {
    auto doc = api::document_parse(*description, opts.description);
    if (!doc) return report_error(doc.message());
    doc.value().root["target"] = opts.target_name;
    description_text = doc->root.dump();
  }

  for (const auto& [path, option] : {std::pair{opts.target, "--target"}, {opts.model, "--model"}, {opts.calibration, "--calibration"},
                                      {opts.validation, "--validation"}})
    if (!path.empty() && !fs::is_regular_file(path)) return report_error(std::string(option) + ": no file '" + path + "'");
  if (!opts.idempotency_key.empty()) client.header_next("Idempotency-Key: " + opts.idempotency_key);
  std::unique_ptr<curl_mime, decltype(&curl_mime_free)> mime(nullptr, curl_mime_free);
  auto post = client.request("/v1/jobs", [&](CURL* c) {
    mime.reset(curl_mime_init(c));
    curl_mimepart* part = curl_mime_addpart(mime.get());
    curl_mime_name(part, "description");
    curl_mime_data(part, description_text.data(), description_text.size());
    curl_mime_filename(part, fs::path(opts.description).filename().c_str());
    auto file_part = [&](const char* name, const std::string& path) {
      if (path.empty()) return;
      curl_mimepart* p = curl_mime_addpart(mime.get());
      curl_mime_name(p, name);
      curl_mime_filedata(p, path.c_str());
    };
    file_part("target", opts.target);
    file_part("model", opts.model);
    file_part("calibration", opts.calibration);
    file_part("validation", opts.validation);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime.get());
  }, nullptr, nullptr, 3600);
  if (!post) return report_error(post.error().message);
  if (post->status != 202 && post->status != 200) return report_error("submitting: " + server_error(*post));
  const json accepted = json::parse(post->body, nullptr, false);
  if (accepted.is_discarded() || !accepted.contains("id")) return report_error("the server's answer has no job id: " + post->body.substr(0, 200));
  const std::string id = accepted["id"];
  const std::string job_url = client.server() + "/v1/jobs/" + id;
  if (!opts.json_output) {
    std::printf("job %s %s%s\n", id.c_str(), job_url.c_str(), post->status == 200 ? " (an earlier submission with this key)" : "");
    std::fflush(stdout);
  }
  json result = {{"id", id}, {"url", job_url}, {"state", accepted.value("state", "")}};
  int exit_code = kExitOk;

  if (opts.wait) {
    EventStream es;
    es.quiet = opts.json_output;
    // A dropped stream (a server restart, a proxy's timeout) is resumed where it stopped.
    constexpr int kStreamAttempts = 30;
    std::string last_failure;
    for (int attempt = 0; !es.done && attempt < kStreamAttempts; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::seconds(2));
      if (es.last_id > 0) client.header_next("Last-Event-ID: " + std::to_string(es.last_id));
      client.header_next("Accept: text/event-stream");
      es.buffer.clear();
      auto streamed = client.request("/v1/jobs/" + id + "/events", [](CURL*) {}, on_events, &es, 0);
      if (!streamed) {
        last_failure = streamed.error().message;
        continue;
      }
      if (streamed->status != 200) return report_error("following the job: " + server_error(Reply{streamed->status, es.buffer}));
      last_failure = "the stream ended without a final event";
    }
    if (!es.done)
      return report_error("following job " + id + ": gave up after " + std::to_string(kStreamAttempts) + " attempts (" + last_failure + ")");
    result["state"] = es.state;
    if (!es.message.empty()) result["error"] = es.message;
    if (es.state != "succeeded") exit_code = kExitError;
    if (!opts.json_output) std::printf("job %s %s%s%s\n", id.c_str(), es.state.c_str(), es.message.empty() ? "" : ": ", es.message.c_str());
    if (exit_code == kExitOk && !opts.download.empty()) {
      auto names = artifacts_download(client, id, opts.download);
      if (!names) return report_error(names.error().message);
      result["downloaded"] = *names;
      if (!opts.json_output) std::printf("downloaded %zu files to %s (SHA-256 checked)\n", names->size(), opts.download.c_str());
    }
  }
  if (opts.json_output) std::printf("%s\n", result.dump(2).c_str());
  std::fflush(stdout);
  if (exit_code != kExitOk)
    return report_error("job " + id + " " + result["state"].get<std::string>() +
                        (result.contains("error") ? ": " + result["error"].get<std::string>() : ""));
  return kExitOk;
}

}  // namespace

void add_submit_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<SubmitOptions>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a job to kiln serve (and wait for it, download its artifacts)");
  cmd->add_option("--server", opts->server, "The server's URL, e.g. http://127.0.0.1:8080")->required();
  cmd->add_option("--token", opts->token, "API token (default: $KILN_TOKEN)");
  cmd->add_option("--description", opts->description, "Application description (YAML or JSON)")->required();
  auto* target = cmd->add_option("--target", opts->target, "Target infrastructure document");
  auto* target_name = cmd->add_option("--target-name", opts->target_name, "A target registered on the server");
  target->excludes(target_name);
  cmd->add_option("--model", opts->model, "The ONNX model")->required();
  cmd->add_option("--calibration", opts->calibration, "Calibration samples (.npz)");
  cmd->add_option("--validation", opts->validation, "Validation set (.npz)");
  cmd->add_option("--idempotency-key", opts->idempotency_key, "A retry with the same key returns the same job");
  cmd->add_flag("--wait", opts->wait, "Follow the job; exit 0 only when it succeeded");
  cmd->add_option("--download", opts->download, "Save report.json and every artifact here (implies --wait)");
  cmd->add_flag("--json", opts->json_output, "Print the outcome as JSON (progress goes to stderr)");
  cmd->callback([opts, &run] {
    run = [opts] {
      if (opts->target.empty() && opts->target_name.empty()) return report_error("give --target FILE or --target-name NAME");
      return run_submit(*opts);
    };
  });
}

}  // namespace kiln::cli
