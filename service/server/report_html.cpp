#include "service/server/report_html.h"

#include <cctype>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "service/server/html_text.h"
#include "service/server/report_chart.h"

namespace kiln::server {
namespace {

using json = nlohmann::json;

// Typed reads that never throw: report.json is written by stages, but read as untrusted.
const json& member(const json& j, const char* key) {
  static const json null_value;
  if (!j.is_object()) return null_value;
  auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}
std::optional<double> number_of(const json& j, const char* key) {
  const json& v = member(j, key);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}
std::string string_of(const json& j, const char* key) {
  const json& v = member(j, key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return "";
}
bool true_at(const json& j, const char* key) { return member(j, key).is_boolean() && member(j, key).get<bool>(); }

std::string optional_text(const std::optional<double>& v, const std::string& unit = "") {
  return v ? number_text(*v) + unit : "–";
}
std::string percent_text(const std::optional<double>& fraction) {
  return fraction ? number_text(100 * *fraction) + "%" : "–";
}

// Artifact names are checked against the API's pattern when served; here they are also
// percent-encoded, so that no name can break out of the href.
std::string url_segment(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// The documented candidates[] {name, precision, batch, threads, predicted_ms, measured_ms,
// throughput_per_s, accuracy_drop, chosen} as chart rows.
std::vector<ChartRow> candidate_rows(const json& candidates) {
  std::vector<ChartRow> rows;
  for (const json& c : candidates) {
    ChartRow r;
    r.label = string_of(c, "name");
    if (r.label.empty())
      r.label = string_of(c, "precision") + " b" + string_of(c, "batch") + " t" + string_of(c, "threads");
    r.predicted_ms = number_of(c, "predicted_ms");
    r.measured_ms = number_of(c, "measured_ms");
    if (auto t = number_of(c, "throughput_per_s")) r.note = number_text(*t) + "/s";
    if (auto d = number_of(c, "accuracy_drop")) r.note += (r.note.empty() ? "" : " · ") + ("drop " + number_text(100 * *d) + " pt");
    r.chosen = true_at(c, "chosen");
    rows.push_back(std::move(r));
  }
  return rows;
}

// Without candidates: the one compiled plan, timed while verifying. (The reference's time is not
// charted beside it: without warm-up the plan's first runs pay its set-up, which would make the
// comparison look backwards; both times are listed under Verification.)
std::vector<ChartRow> verification_rows(const json& v) {
  const auto batches = number_of(v, "batches");
  const auto compiled = number_of(v, "compiled_seconds");
  if (!batches || *batches <= 0 || !compiled) return {};
  ChartRow r{"compiled plan, batch " + string_of(v, "batch"), std::nullopt, *compiled * 1000 / *batches, "", true};
  const auto samples = number_of(member(v, "data"), "samples");
  if (samples && *compiled > 0) r.note = number_text(*samples / *compiled) + "/s";
  const json& outputs = member(v, "outputs");
  if (outputs.is_array() && !outputs.empty())
    if (auto agree = number_of(outputs[0], "top1_agreement")) r.note += " · top-1 agree " + percent_text(agree);
  return {r};
}

// Where a candidate's accuracy was verified, short: "cpu, 2 threads", "fp16 emulated on the CPU"
// (kiln optimize's verified_on up to its parenthesis), "–" when not given.
std::string verified_on_text(const json& c) {
  const std::string v = string_of(c, "verified_on");
  if (v.empty()) return "–";
  return v.substr(0, v.find(" ("));
}

void candidates_section(std::ostringstream& s, const json& report) {
  const json& candidates = member(report, "candidates");
  const json& verification = member(report, "verification");
  s << "<section aria-labelledby=\"report-configurations\">\n<h3 id=\"report-configurations\">Configurations</h3>\n";
  if (candidates.is_array() && !candidates.empty()) {
    s << report_chart_svg(candidate_rows(candidates), "Predicted and measured latency per candidate",
                          "One row per candidate the planner considered: predicted and measured latency per batch in "
                          "milliseconds, throughput and accuracy drop; the chosen candidate is marked with a star.");
    s << "<table>\n<caption>Candidates</caption>\n<thead><tr><th scope=\"col\">name</th><th scope=\"col\">precision</th>"
         "<th scope=\"col\">batch</th><th scope=\"col\">threads</th><th scope=\"col\">predicted</th>"
         "<th scope=\"col\">measured</th><th scope=\"col\">throughput</th><th scope=\"col\">accuracy drop</th>"
         "<th scope=\"col\">verified on</th><th scope=\"col\">chosen</th></tr></thead>\n<tbody>\n";
    for (const json& c : candidates) {
      s << "<tr" << (true_at(c, "chosen") ? " class=\"chosen\"" : "") << "><td>" << html_escape(string_of(c, "name"))
        << "</td><td>" << html_escape(string_of(c, "precision")) << "</td><td>" << html_escape(string_of(c, "batch"))
        << "</td><td>" << html_escape(string_of(c, "threads")) << "</td><td>" << optional_text(number_of(c, "predicted_ms"), " ms")
        << "</td><td>" << optional_text(number_of(c, "measured_ms"), " ms") << "</td><td>"
        << optional_text(number_of(c, "throughput_per_s"), "/s") << "</td><td>" << percent_text(number_of(c, "accuracy_drop"))
        << "</td><td>" << html_escape(verified_on_text(c)) << "</td><td>" << (true_at(c, "chosen") ? "★ chosen" : "")
        << "</td></tr>\n";
    }
    s << "</tbody>\n</table>\n";
  } else if (std::vector<ChartRow> rows = verification_rows(verification); !rows.empty()) {
    const std::string samples = string_of(member(verification, "data"), "samples");
    s << "<p>This job compiled one configuration (the planner's candidates are not in this report). Its latency per "
         "batch was measured while verifying: "
      << html_escape(samples) << " samples in " << html_escape(string_of(verification, "batches")) << " batches, "
      << html_escape(string_of(verification, "engine_threads"))
      << " threads, including its set-up (no warm-up): a rough, pessimistic figure.</p>\n";
    s << report_chart_svg(rows, "Measured latency per batch of the compiled plan",
                          "Latency per batch in milliseconds of the compiled plan (the one packaged, marked with a "
                          "star), measured while verifying on " + samples + " samples, set-up included.");
  } else {
    s << "<p>This report has neither candidates nor timed verification: nothing to chart.</p>\n";
  }
  s << "</section>\n";
}

// kiln optimize's reasons (the plan's, then what verifying and measuring decided), as text.
void explanation_section(std::ostringstream& s, const json& report) {
  const json& lines = member(report, "explanation");
  if (!lines.is_array() || lines.empty()) return;
  s << "<section aria-labelledby=\"report-explanation\">\n<h3 id=\"report-explanation\">Why this choice</h3>\n<ul>\n";
  for (const json& line : lines)
    if (line.is_string()) s << "<li>" << html_escape(line.get<std::string>()) << "</li>\n";
  s << "</ul>\n</section>\n";
}

void verification_section(std::ostringstream& s, const json& report) {
  const json& v = member(report, "verification");
  s << "<section aria-labelledby=\"report-verification\">\n<h3 id=\"report-verification\">Verification</h3>\n";
  if (!v.is_object()) {
    s << "<p>No verification figures in this report.</p>\n</section>\n";
    return;
  }
  const json& data = member(v, "data");
  s << "<dl class=\"facts\">\n<dt>data</dt><dd>" << html_escape(string_of(data, "source"))
    << (true_at(data, "random") ? " (random inputs: numerical agreement only, no accuracy)" : "") << "</dd>\n"
    << "<dt>samples</dt><dd>" << html_escape(string_of(data, "samples")) << "</dd>\n"
    << "<dt>reference</dt><dd>" << html_escape(string_of(v, "reference")) << "</dd>\n"
    << "<dt>batch</dt><dd>" << html_escape(string_of(v, "batch")) << "</dd>\n"
    << "<dt>run time</dt><dd>compiled plan " << optional_text(number_of(v, "compiled_seconds"), " s") << " ("
    << html_escape(string_of(v, "engine_threads")) << " threads), reference "
    << optional_text(number_of(v, "reference_seconds"), " s") << " (" << html_escape(string_of(v, "reference_threads"))
    << " threads), set-up included</dd>\n</dl>\n";
  const json& outputs = member(v, "outputs");
  if (outputs.is_array() && !outputs.empty()) {
    s << "<table>\n<caption>Compiled plan against the reference, per output</caption>\n<thead><tr>"
         "<th scope=\"col\">output</th><th scope=\"col\">cosine</th><th scope=\"col\">max abs error</th>"
         "<th scope=\"col\">top-1 agreement</th><th scope=\"col\">accuracy (reference → compiled)</th>"
         "<th scope=\"col\">accuracy drop</th></tr></thead>\n<tbody>\n";
    for (const json& o : outputs) {
      const auto ref_acc = number_of(o, "reference_accuracy"), acc = number_of(o, "compiled_accuracy");
      s << "<tr><td>" << html_escape(string_of(o, "name")) << "</td><td>" << optional_text(number_of(o, "cosine"))
        << "</td><td>" << optional_text(number_of(o, "max_abs_error")) << "</td><td>"
        << percent_text(number_of(o, "top1_agreement")) << "</td><td>"
        << (ref_acc && acc ? percent_text(ref_acc) + " → " + percent_text(acc) : "–") << "</td><td>"
        << (number_of(o, "accuracy_drop") ? number_text(100 * *number_of(o, "accuracy_drop")) + " pt" : "–")
        << "</td></tr>\n";
    }
    s << "</tbody>\n</table>\n";
  }
  s << "</section>\n";
}

void stages_section(std::ostringstream& s, const jobs::JobRecord& job) {
  s << "<section aria-labelledby=\"report-stages\">\n<h3 id=\"report-stages\">Stages</h3>\n<table>\n<thead><tr>"
       "<th scope=\"col\">stage</th><th scope=\"col\">state</th><th scope=\"col\">time</th><th scope=\"col\">started</th>"
       "<th scope=\"col\">message</th></tr></thead>\n<tbody>\n";
  double total = 0;
  for (const jobs::StageRecord& st : job.stages) {
    const bool finished = !st.finished_at.empty();
    if (finished) total += st.seconds;
    s << "<tr><td>" << html_escape(st.name) << "</td><td class=\"state state-" << html_escape(st.state) << "\">"
      << html_escape(st.state) << "</td><td>" << (finished ? number_text(st.seconds) + " s" : "–") << "</td><td>"
      << html_escape(st.started_at) << "</td><td>" << html_escape(st.message) << "</td></tr>\n";
  }
  s << "</tbody>\n<tfoot><tr><th scope=\"row\">total</th><td></td><td>" << number_text(total)
    << " s</td><td></td><td></td></tr></tfoot>\n</table>\n</section>\n";
}

void artifacts_section(std::ostringstream& s, const jobs::JobRecord& job, const json& report) {
  const json& artifacts = member(report, "artifacts");
  s << "<section aria-labelledby=\"report-artifacts\">\n<h3 id=\"report-artifacts\">Artifacts</h3>\n";
  if (!artifacts.is_array() || artifacts.empty()) {
    s << "<p>No artifacts.</p>\n</section>\n";
    return;
  }
  s << "<table>\n<thead><tr><th scope=\"col\">file</th><th scope=\"col\">kind</th><th scope=\"col\">size</th>"
       "<th scope=\"col\">SHA-256</th></tr></thead>\n<tbody>\n";
  for (const json& a : artifacts) {
    const std::string name = string_of(a, "name");
    const auto bytes = number_of(a, "bytes");
    const std::string sha = string_of(a, "sha256");
    s << "<tr><td><a class=\"artifact\" download href=\"/v1/jobs/" << url_segment(job.id) << "/artifacts/"
      << url_segment(name) << "\">" << html_escape(name) << "</a></td><td>" << html_escape(string_of(a, "kind"))
      << "</td><td>" << (bytes && *bytes >= 0 && *bytes < 9e18 ? bytes_text(static_cast<int64_t>(*bytes)) : "–")
      << "</td><td><code title=\""
      << html_escape(sha) << "\">" << html_escape(sha.substr(0, 12)) << "</code></td></tr>\n";
  }
  s << "</tbody>\n</table>\n</section>\n";
}

}  // namespace

std::string report_html_render(const jobs::JobRecord& job, std::string_view report_json) {
  json report = json::parse(report_json, nullptr, false);
  const bool readable = report.is_object();
  if (!readable) report = json::object();

  std::ostringstream s;
  s << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>kiln report: "
    << html_escape(job.name)
    << "</title>\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"/static/style.css\">\n</head>\n"
       "<body>\n"
    << "<header class=\"site\"><h1><a href=\"/\">kiln</a> report</h1></header>\n"
    << "<main id=\"report\" class=\"report\">\n<h2>" << html_escape(job.name) << "</h2>\n"
    << "<p class=\"summary\">Job <code>" << html_escape(job.id) << "</code>: <strong class=\"state state-"
    << html_escape(job.state) << "\">" << html_escape(job.state) << "</strong>";
  if (!job.finished_at.empty()) s << ", finished " << html_escape(job.finished_at);
  s << ".</p>\n";
  if (!job.error.empty()) s << "<p class=\"error\" role=\"alert\">" << html_escape(job.error) << "</p>\n";
  if (!readable) s << "<p class=\"error\">report.json cannot be read; only the stages are shown.</p>\n";
  candidates_section(s, report);
  explanation_section(s, report);
  verification_section(s, report);
  stages_section(s, job);
  artifacts_section(s, job, report);
  s << "</main>\n</body>\n</html>\n";
  return s.str();
}

}  // namespace kiln::server
