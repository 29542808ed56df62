#include <filesystem>

#include <catch2/catch.hpp>

#include "service/jobs/job_runner.h"
#include "service/jobs/job_store.h"

namespace fs = std::filesystem;
using namespace kiln::jobs;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln-job-store-" + job_id_new());
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

JobRecord job_new(const std::string& name) {
  JobRecord j;
  j.id = job_id_new();
  j.name = name;
  return j;
}

}  // namespace

TEST_CASE("job store: create, get, list, stages, artifacts survive reopening", "[service]") {
  TempDir dir;
  const std::string db = (dir.path / "jobs.db").string();
  std::string id;
  {
    auto store = JobStore::open(db);
    REQUIRE(store);
    auto created = (*store)->job_create(job_new("fashion"), job_stage_names(), "", "");
    REQUIRE(created);
    CHECK(created->created);
    id = created->id;
    auto claimed = (*store)->job_claim();
    REQUIRE(claimed);
    REQUIRE(claimed->has_value());
    CHECK((*claimed)->id == id);
    CHECK((*claimed)->state == "running");
    CHECK((*claimed)->attempts == 1);
    REQUIRE((*store)->stage_start(id, "validate"));
    REQUIRE((*store)->stage_finish(id, "validate", "done", ""));
    REQUIRE((*store)->artifact_add(id, {"model.kiln", "kiln_plan", "model.kiln", 42, std::string(64, 'a')}));
  }
  auto store = JobStore::open(db);
  REQUIRE(store);
  auto job = (*store)->job_get(id);
  REQUIRE(job);
  REQUIRE(job->has_value());
  const JobRecord& j = **job;
  CHECK(j.name == "fashion");
  CHECK(j.state == "running");
  CHECK(j.stage == "validate");
  CHECK(j.progress == Approx(100.0 / job_stage_names().size()));
  REQUIRE(j.stages.size() == job_stage_names().size());
  CHECK(j.stages[0].state == "done");
  CHECK(!j.stages[0].finished_at.empty());
  CHECK(j.stages[1].state == "pending");
  auto artifacts = (*store)->artifacts_list(id);
  REQUIRE(artifacts);
  REQUIRE(artifacts->size() == 1);
  CHECK((*artifacts)[0].bytes == 42);
  auto list = (*store)->job_list({});
  REQUIRE(list);
  CHECK(list->size() == 1);
  auto none = (*store)->job_get(job_id_new());
  REQUIRE(none);
  CHECK(!none->has_value());
}

TEST_CASE("job store: a restart requeues running jobs, resetting the interrupted stage, and fails them after max attempts",
          "[service]") {
  TempDir dir;
  auto store = JobStore::open((dir.path / "jobs.db").string());
  REQUIRE(store);
  JobStore& s = **store;
  auto created = s.job_create(job_new("a"), job_stage_names(), "", "");
  REQUIRE(created);
  const std::string id = created->id;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto claimed = s.job_claim();
    REQUIRE(claimed);
    REQUIRE(claimed->has_value());
    CHECK((*claimed)->attempts == attempt);
    REQUIRE(s.stage_start(id, "compile"));
    auto requeued = s.jobs_recover(2);
    REQUIRE(requeued);
    auto job = s.job_get(id);
    REQUIRE(job);
    if (attempt == 1) {
      CHECK(*requeued == 1);
      CHECK((*job)->state == "queued");
      CHECK((*job)->stages[1].state == "pending");
      CHECK((*job)->stages[1].message.find("interrupted") != std::string::npos);
    } else {
      CHECK(*requeued == 0);
      CHECK((*job)->state == "failed");
      CHECK((*job)->error.find("interrupted by a server restart 2 times (in stage compile)") != std::string::npos);
    }
  }
}

TEST_CASE("job store: idempotency keys return the first job, or a conflict for another body", "[service]") {
  TempDir dir;
  auto store = JobStore::open((dir.path / "jobs.db").string());
  REQUIRE(store);
  auto first = (*store)->job_create(job_new("a"), job_stage_names(), "key-1", "hash-a");
  REQUIRE(first);
  CHECK(first->created);
  auto again = (*store)->job_create(job_new("a"), job_stage_names(), "key-1", "hash-a");
  REQUIRE(again);
  CHECK(!again->created);
  CHECK(!again->conflict);
  CHECK(again->id == first->id);
  auto other = (*store)->job_create(job_new("a"), job_stage_names(), "key-1", "hash-b");
  REQUIRE(other);
  CHECK(other->conflict);
  auto list = (*store)->job_list({});
  REQUIRE(list);
  CHECK(list->size() == 1);
}

TEST_CASE("job store: cancel, finish and list filters", "[service]") {
  TempDir dir;
  auto store = JobStore::open((dir.path / "jobs.db").string());
  REQUIRE(store);
  JobStore& s = **store;
  auto a = s.job_create(job_new("a"), job_stage_names(), "", "");
  auto b = s.job_create(job_new("b"), job_stage_names(), "", "");
  REQUIRE(a);
  REQUIRE(b);
  auto cancelled = s.job_cancel(a->id, "cancelled by test");
  REQUIRE(cancelled);
  CHECK(*cancelled);
  auto again = s.job_cancel(a->id, "again");
  REQUIRE(again);
  CHECK(!*again);
  auto claimed = s.job_claim();
  REQUIRE(claimed);
  REQUIRE(claimed->has_value());
  CHECK((*claimed)->id == b->id);  // the cancelled one is never claimed
  REQUIRE(s.job_finish(b->id, "succeeded", ""));
  auto done = s.job_list({"succeeded", 10, ""});
  REQUIRE(done);
  REQUIRE(done->size() == 1);
  CHECK((*done)[0].id == b->id);
  auto page = s.job_list({"", 1, ""});
  REQUIRE(page);
  REQUIRE(page->size() == 1);
  CHECK((*page)[0].id == b->id);  // newest first
  auto next = s.job_list({"", 1, (*page)[0].id});
  REQUIRE(next);
  REQUIRE(next->size() == 1);
  CHECK((*next)[0].id == a->id);
  auto counts = s.job_counts();
  REQUIRE(counts);
  CHECK((*counts)["cancelled"] == 1);
  CHECK((*counts)["succeeded"] == 1);
  CHECK((*counts)["queued"] == 0);
}

TEST_CASE("job ids: generated ids are valid and sort by creation, others are not", "[service]") {
  const std::string a = job_id_new();
  CHECK(job_id_valid(a));
  CHECK(!job_id_valid("../etc"));
  CHECK(!job_id_valid(""));
  CHECK(!job_id_valid(std::string(28, 'g')));
}
