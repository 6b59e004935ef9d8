// A whole model's passes handed to a backend that computes elsewhere and later (the page's WebGPU), without
// a GPU: a stand-in backend fills each job with the engine's own numbers when the test lets it land. Checked:
// the pass that lands is the view, edits made meanwhile are computed when it lands, a failure is computed by
// the engine with a note, a model closed meanwhile never sees its job, and what the backend cannot take.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "attnviz/viz/app.hpp"
#include "attnviz/viz/model.hpp"
#include "ui_harness.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using namespace attnviz::viz::test;

namespace {

const std::string kFolder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";

ModelChoice folder_choice() {
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = kFolder;
  return c;
}

struct StandIn : ModelOffload {
  struct Job {
    int ticket;
    std::shared_ptr<const GptWeights> weights;
    GptOptions options;
    GptRequest request;
    GptResult* result;
  };
  bool take = true;
  int tokens_seen = -1, reused_seen = -1;
  std::vector<Job> jobs;

  bool wants(const GptWeights&, const GptOptions&, int tokens, int reused) override {
    tokens_seen = tokens, reused_seen = reused;
    return take;
  }
  void start(int ticket, std::shared_ptr<const GptWeights> w, const GptOptions& o, const GptRequest& req,
             GptResult& r) override {
    jobs.push_back({ticket, std::move(w), o, req, &r});
  }
  // Fills the oldest job with the engine's numbers (its own model on the same weights) and lands it.
  void land(ModelSession& ms, Status outcome = Status::ok()) {
    REQUIRE(!jobs.empty());
    Job j = jobs.front();
    jobs.erase(jobs.begin());
    if (outcome.is_ok()) {
      GptModel m(j.weights, TorchGenerator(), j.options);
      GptResult cpu;
      REQUIRE(m.forward(j.result->ids, j.request, cpu).is_ok());
      GptResult& r = *j.result;
      REQUIRE(r.layers.size() == cpu.layers.size());
      const auto copy = [](Tensor& to, const Tensor& from) {
        REQUIRE(to.size() == from.size());
        if (!to.empty()) std::memcpy(to.ptr(), from.ptr(), from.size() * sizeof(float));
      };
      const auto copy_squares = [](HeadSquares& to, const HeadSquares& from) {  // whatever their strides
        REQUIRE(to.size() == from.size());
        for (int h = 0; h < to.heads && !to.empty(); ++h)
          for (int i = 0; i < to.n; ++i)
            std::memcpy(to.row(h, i), from.row(h, i), static_cast<std::size_t>(to.n) * sizeof(float));
      };
      copy(r.logits, cpu.logits);
      for (std::size_t l = 0; l < r.layers.size(); ++l) {
        Result& a = r.layers[l].attention;
        const Result& b = cpu.layers[l].attention;
        copy_squares(a.weights, b.weights), copy_squares(a.scores, b.scores),
            copy_squares(a.scaled, b.scaled);
        copy(a.inputs, b.inputs), copy(a.q, b.q), copy(a.k, b.k), copy(a.v, b.v);
        copy(a.context, b.context), copy(a.output, b.output);
      }
      r.backend = "stand-in";
    }
    ms.deliver(j.ticket, outcome, 12.5);
  }
};

// The engine's own pass over `text`, for comparison.
GptResult engine_pass(const std::string& text, int detail) {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  ms.set_detail_layer(detail);
  REQUIRE(ms.recompute(text).is_ok());
  return ms.result();
}

void check_same_pass(const GptResult& a, const GptResult& b) {
  CHECK(a.ids == b.ids);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    CHECK(a.layers[l].attention.weights == b.layers[l].attention.weights);
    CHECK(a.layers[l].attention.dropped == b.layers[l].attention.dropped);
    CHECK(a.layers[l].attention.q.data == b.layers[l].attention.q.data);
  }
  REQUIRE(a.next.size() == b.next.size());
  for (std::size_t k = 0; k < a.next.size(); ++k) CHECK(a.next[k].id == b.next[k].id);
}

}  // namespace

TEST_CASE("model offload: the pass lands later and is the view, as the engine computes it") {
  StandIn gpu;
  ModelSession ms;
  ms.offload = &gpu;
  REQUIRE(ms.open(folder_choice()).is_ok());
  ms.set_detail_layer(1);
  REQUIRE(ms.recompute("In the heart of the city").is_ok());
  CHECK(ms.computing());
  CHECK_FALSE(ms.has_result());
  CHECK(gpu.reused_seen == 0);
  const int generation = ms.generation();
  gpu.land(ms);
  CHECK_FALSE(ms.computing());
  CHECK(ms.note().empty());
  REQUIRE(ms.has_result());
  CHECK(ms.generation() > generation);
  CHECK(ms.result().backend == "stand-in");
  CHECK(ms.result().seconds == doctest::Approx(0.0125));
  check_same_pass(ms.result(), engine_pass("In the heart of the city", 1));
  CHECK(ms.layer(1)->tokens == ms.pieces());  // labelled as the engine's passes are
  CHECK(ms.kinds().size() == 2);
  // The backend is told what the engine's incremental path would reuse: after an engine pass, typing at the
  // end reuses the prefix.
  gpu.take = false;
  REQUIRE(ms.recompute("In the heart of the city").is_ok());
  CHECK(ms.result().backend.empty());
  REQUIRE(ms.recompute("In the heart of the city at night").is_ok());
  CHECK(gpu.reused_seen > 0);
  CHECK(gpu.reused_seen == ms.result().reused);
}

TEST_CASE("model offload: edits made while a pass is in flight are computed when it lands") {
  StandIn gpu;
  ModelSession ms;
  ms.offload = &gpu;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute("In the").is_ok());
  REQUIRE(ms.recompute("In the heart").is_ok());
  REQUIRE(ms.recompute("In the heart of").is_ok());
  CHECK(gpu.jobs.size() == 1);  // one at a time
  gpu.land(ms);
  CHECK(ms.has_result());
  check_same_pass(ms.result(), engine_pass("In the", -1));  // the first edit's pass is shown meanwhile
  REQUIRE(gpu.jobs.size() == 1);                            // and the last edit goes next
  CHECK(ms.computing());
  gpu.land(ms);
  CHECK_FALSE(ms.computing());
  check_same_pass(ms.result(), engine_pass("In the heart of", -1));
  // A pass computed by the engine while a job is in flight (the backend no longer wants it) wins: the
  // job lands unseen.
  REQUIRE(ms.recompute("In the heart of the").is_ok());
  gpu.take = false;
  REQUIRE(ms.recompute("In the heart of the city").is_ok());
  const std::vector<int> ids = ms.ids();
  gpu.land(ms);
  CHECK(ms.ids() == ids);
  CHECK(ms.result().backend.empty());
  CHECK(gpu.jobs.empty());
}

TEST_CASE("model offload: a failed pass is computed by the engine, with a note") {
  StandIn gpu;
  ModelSession ms;
  ms.offload = &gpu;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute("In the heart of the city").is_ok());
  gpu.land(ms, Status::fail("WebGPU: the GPU device was lost"));
  CHECK_FALSE(ms.computing());
  CHECK(ms.note() == "WebGPU: the GPU device was lost: this pass was computed by the CPU engine instead");
  CHECK(gpu.jobs.empty());  // not handed back to the backend that failed
  REQUIRE(ms.has_result());
  CHECK(ms.result().backend.empty());
  check_same_pass(ms.result(), engine_pass("In the heart of the city", -1));
  // The next pass goes to the backend again; the note goes once one succeeds.
  REQUIRE(ms.recompute("In the heart of the city at").is_ok());
  gpu.land(ms);
  CHECK(ms.note().empty());
  CHECK(ms.result().backend == "stand-in");
  // A pass the backend cannot even begin (train mode's dropout is the engine's alone) is computed here.
  ModelChoice train = folder_choice();
  train.train = true;
  REQUIRE(ms.open(train).is_ok());
  REQUIRE(ms.recompute("In the heart").is_ok());
  CHECK_FALSE(ms.computing());
  CHECK(gpu.jobs.empty());
  CHECK(ms.note().find("train-mode passes") != std::string::npos);
  CHECK(ms.note().find("computed by the CPU engine instead") != std::string::npos);
  CHECK(ms.has_result());
}

TEST_CASE("model offload: a model closed while its pass is in flight never sees it, and Generate waits") {
  StandIn gpu;
  ModelSession ms;
  ms.offload = &gpu;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute("In the heart").is_ok());
  REQUIRE(ms.open(folder_choice()).is_ok());  // opened again: a new model
  CHECK_FALSE(ms.computing());
  gpu.land(ms);  // the old job's storage lived until now, and it changes nothing
  CHECK_FALSE(ms.has_result());
  // Generate takes the argmax of the pass on screen and hands the longer text's pass over.
  REQUIRE(ms.recompute("In the heart").is_ok());
  gpu.land(ms);
  const int next = ms.result().next.front().id;
  const std::size_t tokens = ms.ids().size();
  std::string text = "In the heart";
  REQUIRE(ms.generate(text, 1).is_ok());
  CHECK(ms.computing());
  gpu.land(ms);
  REQUIRE(ms.ids().size() == tokens + 1);
  CHECK(ms.ids().back() == next);
  CHECK(ms.result().backend == "stand-in");
}

TEST_CASE("model offload: the host's Compute controls are drawn in the model view, grid and opened layer") {
  Ui ui;
  App app;
  int drawn = 0;
  app.host_controls = [&drawn] { ++drawn; };
  ui.frame(app);
  CHECK(drawn == 1);  // the chapter-3 view, as before
  StandIn gpu;
  app.model.offload = &gpu;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  gpu.land(app.model);
  ui.frame(app);
  CHECK(drawn == 2);  // the grid
  app.model_view.layer = 1;
  app.model.set_detail_layer(1);
  REQUIRE(start(app).is_ok());
  gpu.land(app.model);
  ui.frame(app);
  CHECK(drawn == 3);  // an opened layer
  CHECK(shown_result(app) == app.model.layer(1));
  CHECK(app.model.result().backend == "stand-in");
}

TEST_CASE("model offload: with the causal tools on, the pass runs on the engine, and goes back after") {
  ModelSession ms;
  StandIn offload;
  ms.offload = &offload;
  REQUIRE(ms.open(folder_choice()).is_ok());
  CausalTools t;
  t.lens = true;
  ms.set_causal(t);
  REQUIRE(ms.recompute("A rose is a rose").is_ok());
  CHECK(offload.jobs.empty());  // the probe's named points are the engine's own pass's
  CHECK_FALSE(ms.computing());
  CHECK(ms.has_lens());
  ms.set_causal(CausalTools());
  REQUIRE(ms.recompute("A rose is a rose is").is_ok());
  CHECK(offload.jobs.size() == 1);
  CHECK(ms.computing());
  offload.land(ms);
  CHECK_FALSE(ms.has_lens());
}
