// A job's report as one HTML page (GET /v1/jobs/{id}/report?format=html; the web form shows its
// <main id="report">): the job's state, a chart of the configurations (report_chart), the
// candidates or measured figures as a table, the verification figures, the stages with their
// timings and the artifacts with sizes and download links.
// The stages and timings come from the job store, the rest from report.json. Every string from
// either is escaped (job, model, candidate and output names and error messages come from users),
// and links are built from the job id and artifact names, never taken from the report. The page
// has no script and no inline style: it links /static/style.css and fits the form's CSP.
#pragma once

#include <string>
#include <string_view>

#include "service/jobs/job_store.h"

namespace kiln::server {

// `report_json` is the text of report.json; a report that does not parse (or has unexpected
// types) is rendered with what can be read and says so.
std::string report_html_render(const jobs::JobRecord& job, std::string_view report_json);

}  // namespace kiln::server
