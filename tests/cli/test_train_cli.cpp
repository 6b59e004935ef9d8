// attnviz-cli train end to end (in-process): the book's lines for the reduced run of the PyTorch fixture,
// JSON lines, a checkpoint that --model opens and --resume continues from, and every bad input refused in one
// line.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/head_kinds.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/torch_rng.hpp"
#include "attnviz/train.hpp"
#include "check.hpp"
#include "cli_run.hpp"
#include "run_state_check.hpp"

using namespace attnviz;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kTrain = fs::path(ATTNVIZ_FIXTURES_DIR) / "train";
const std::string kVocab = (fs::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string();
const std::string kStory = (kTrain / "story.txt").string();

// The book-run fixture's reduced sizes, as flags.
std::vector<std::string> reduced(std::vector<std::string> more) {
  std::vector<std::string> a = {"train",
                                kStory,
                                "--vocab",
                                kVocab,
                                "--vocab-size",
                                "512",
                                "--context-length",
                                "32",
                                "--emb-dim",
                                "32",
                                "--heads",
                                "4",
                                "--layers",
                                "2",
                                "--lr",
                                "2e-3"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// reduced() with one of its flags given another value.
std::vector<std::string> reduced_with(const std::string& flag, const std::string& value) {
  std::vector<std::string> a = reduced({});
  const auto it = std::find(a.begin(), a.end(), flag);
  REQUIRE(it != a.end());
  *(it + 1) = value;
  return a;
}

// One line on stderr that holds `needle`, exit status 1, nothing on stdout.
void check_refused(const std::vector<std::string>& args, const std::string& needle) {
  const test::Run r = test::cli(args);
  CAPTURE(r.err);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("attnviz-cli train: ", 0) == 0);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

void check_refused_cli(const std::vector<std::string>& args, const std::string& needle) {
  test::check_refused(args, needle);
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) v.push_back(line);
  return v;
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("attnviz_train_cli_" + name);
  fs::remove_all(p);
  return p;
}

}  // namespace

TEST_CASE("train cli: the reduced book run prints PyTorch's lines") {
  std::ifstream f(kTrain / "book_run.json");
  const json want = json::parse(f);
  const test::Run r = test::cli(reduced({"--epochs", "2"}));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const std::vector<std::string> got = lines_of(r.out);
  // the first two epochs of the fixture (its third epoch starts at the third sample's line + 1)
  std::vector<std::string> expected;
  int samples = 0;
  for (const json& line : want["lines"]) {
    expected.push_back(line);
    if (line.get<std::string>().rfind("Ep ", 0) != 0 && ++samples == 2) break;
  }
  CHECK(got == expected);
}

TEST_CASE("train cli: JSON lines, a checkpoint --model opens, and --resume") {
  const fs::path dir = temp_dir("checkpoint");
  const test::Run r = test::cli(reduced({"--epochs", "1", "--json", "--out", dir.string()}));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 11);  // 9 evaluations (steps 0, 5, ..., 40 of 42), 1 sample, done
  const json first = json::parse(lines[0]);
  CHECK(first["event"] == "eval");
  CHECK(first["step"] == 0);
  CHECK(first["tokens_seen"] == 64);
  CHECK(std::abs(first["train_loss"].get<double>() - 6.371) < 0.0005);
  CHECK(json::parse(lines[9])["event"] == "sample");
  const json done = json::parse(lines[10]);
  CHECK(done["event"] == "done");
  CHECK(done["steps"] == 42);
  CHECK(done["checkpoint"] == dir.string());
  for (const char* file :
       {"model.safetensors", "config.json", "optimizer.safetensors", "vocab.json", "merges.txt"})
    CHECK(fs::exists(dir / file));

  // The checkpoint reads back bit for bit, optimizer state included.
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  REQUIRE(read_checkpoint(dir.string(), m, opt, has_optimizer).is_ok());
  CHECK(has_optimizer);
  CHECK(opt.steps == 42);
  CHECK(opt.lr == 2e-3);
  CHECK(m.config().gpt.n_heads == 4);
  CHECK(m.config().gpt.context_length == 32);

  // The model view opens it with its own tokenizer; its greedy continuation is the run's sample.
  const std::string sample = json::parse(lines[9])["text"];
  const test::Run view =
      test::cli({"--model", dir.string(), "--text", "Every effort moves you", "--generate", "50", "--json"});
  CAPTURE(view.err);
  REQUIRE(view.status == 0);
  const json v = json::parse(view.out);
  std::string generated = v["generated_text"];
  for (char& c : generated)
    if (c == '\n') c = ' ';
  CHECK("Every effort moves you" + generated == sample);

  // --resume continues its run: --epochs is the run's total, so the second epoch's 42 steps follow.
  const test::Run more = test::cli({"train", kStory, "--vocab", kVocab, "--resume", dir.string(), "--epochs",
                                    "2", "--json", "--lr", "2e-3"});
  CAPTURE(more.err);
  REQUIRE(more.status == 0);
  const json resumed = json::parse(lines_of(more.out).back());
  CHECK(resumed["resumed_optimizer"] == true);
  CHECK(resumed["resumed_run"] == true);
  CHECK(resumed["steps"] == 84);
  CHECK(json::parse(lines_of(more.out).front())["step"] == 45);
  check_refused({"train", kStory, "--vocab", kVocab, "--resume", dir.string(), "--epochs", "1"},
                "'s run has done 1 epochs: --epochs (the run's total) must be more");
  check_refused({"train", kStory, "--vocab", kVocab, "--resume", dir.string(), "--layers", "3"},
                "--layers does not apply to --resume");
  fs::remove_all(dir);
}

TEST_CASE("train cli: bad input gets one line") {
  const fs::path dir = temp_dir("bad");
  fs::create_directories(dir);
  const auto file = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  check_refused({"train", file("empty.txt", ""), "--vocab", kVocab}, "is empty");
  check_refused({"train", file("short.txt", "Every effort moves you."), "--vocab", kVocab, "--vocab-size",
                 "512", "--emb-dim", "32", "--heads", "4", "--layers", "1"},
                "too short for one batch of 2 windows of 257 tokens");
  check_refused({"train", file("bad.txt", "ok \xff"), "--vocab", kVocab},
                "not valid UTF-8 (bad byte 0xFF at offset 3)");
  // A tokenizer.json whose normalizers double the text 40 times: refused while the text is tokenized, before
  // anything trains, naming the step (unbounded before: 2^40 times the text).
  {
    const fs::path vocab = dir / "growing";
    fs::create_directories(vocab);
    json steps = json::array();
    for (int i = 0; i < 40; ++i)
      steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
    std::ofstream(vocab / "tokenizer.json")
        << json{{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array()}}},
                {"normalizer", {{"type", "Sequence"}, {"normalizers", steps}}}}
               .dump();
    check_refused({"train", kStory, "--vocab", vocab.string()},
                  "growing/tokenizer.json: normalizer.normalizers[7] (Replace) makes the text longer than");
  }
  check_refused({"train", (dir / "missing.txt").string(), "--vocab", kVocab}, "missing.txt");
  check_refused(reduced({"--epochs", "0"}), "--epochs is 0: it must be at least 1");
  check_refused(reduced({"--train-ratio", "1.5"}), "--train-ratio must be between 0 and 1");
  check_refused(reduced_with("--heads", "5"), "not divisible by 5 heads");
  check_refused(reduced_with("--vocab-size", "100"), "outside the model's vocabulary of 100");
  // the memory check counts parameters, gradients, both moments and activations before anything is drawn
  check_refused({"train", kStory, "--vocab", kVocab, "--memory-budget", "100MB"}, "AdamW moments ");
  check_refused({"train"}, "give a text file to train on");
  fs::remove_all(dir);
}

TEST_CASE("train cli: --task induction, its checkpoint in the model view's engine, and its refusals") {
  const fs::path dir = temp_dir("induction");
  const test::Run r = test::cli({"train", "--task", "induction", "--steps", "20", "--eval-freq", "10",
                                 "--json", "--out", dir.string()});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 4);  // steps 0, 10, 20, done
  const json first = json::parse(lines[0]);
  CHECK(first["step"] == 0);
  CHECK(first["heads"].size() == 2);
  CHECK(first["heads"][0].size() == 4);
  CHECK(first["heads"][0][0]["kind"].is_string());
  const json done = json::parse(lines[3]);
  CHECK(done["steps"] == 20);
  CHECK(done["checkpoint"] == dir.string());

  // The attention-only checkpoint opens like any model folder, and its engine pass gives the trained
  // model's own attention and next-token probabilities.
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  REQUIRE(read_checkpoint(dir.string(), m, opt, has_optimizer).is_ok());
  CHECK(m.config().gpt.attention_only);
  GptLoadOptions lo;
  GptWeights w;
  REQUIRE(load_gpt(dir.string(), lo, w).is_ok());
  CHECK(w.config.attention_only);
  const std::vector<int> ids = {3, 17, 5, 9, 41, 2, 3, 17, 5, 9};
  GptOptions go;
  go.train = false;
  GptModel model(std::make_shared<GptWeights>(std::move(w)), TorchGenerator(1), go);
  GptResult res;
  REQUIRE(model.forward(ids, GptRequest{}, res).is_ok());
  std::vector<std::vector<std::vector<float>>> maps;
  REQUIRE(m.attention_maps(ids, maps).is_ok());
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) {
      const Result* a = &res.layer(l)->attention;
      const Tensor weights = a->weights.to_tensor();
      const float* got = weights.slice(h);
      CHECK(test::max_rel_error(got, maps[l][h].data(), maps[l][h].size()) <= 1e-5);
    }
  std::vector<float> probs;
  REQUIRE(m.last_probabilities(ids, probs).is_ok());
  CHECK(std::abs(res.next[0].probability - probs[static_cast<std::size_t>(res.next[0].id)]) <= 1e-5);

  // The model CLI takes it by ids (it has no tokenizer), labels tokens #ID, and gives each head's kind as
  // the model view labels it.
  const test::Run v = test::cli({"--model", dir.string(), "--ids", "3,17,5,9,41,2,3,17,5,9", "--json"});
  CAPTURE(v.err);
  REQUIRE(v.status == 0);
  const json j = json::parse(v.out);
  CHECK(j["model"]["attention_only"] == true);
  CHECK(j["tokens"][1]["label"] == "#17");
  CHECK(j["tokens"][1]["piece"].is_null());
  const json& head = j["layers"][1]["heads"][2];
  std::vector<float> weights;
  for (const json& row : head["weights"])
    for (const json& x : row) weights.push_back(x.is_null() ? 0.0f : x.get<float>());
  const HeadScores k = score_head(WeightsView{weights.data(), 10, 10, 10, 1.0f}, ids);
  CHECK(head["kind"] == to_string(k.kind));
  CHECK(std::abs(head["kind_scores"]["previous"].get<double>() - k.previous) < 1e-6);
  CHECK(std::abs(head["kind_scores"]["induction"].get<double>() - k.induction) < 1e-6);
  check_refused_cli({"--model", dir.string(), "--ids", "3,128"},
                    "--ids: 128 is outside the vocabulary (0..127)");
  check_refused_cli({"--model", dir.string(), "--ids", "3,x"}, "--ids: 'x' is not a token id");

  // --task induction refuses the book's flags, and the book its
  check_refused({"train", "--task", "induction", "--epochs", "2"},
                "--epochs does not apply to --task induction");
  check_refused({"train", kStory, "--steps", "5"}, "--steps needs --task induction");
  check_refused({"train", "--task", "story"}, "--task 'story' is not book or induction");
  fs::remove_all(dir);
}

namespace {

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A tiny run on the story with shuffling and dropout on (both flavours' masks, the schedule and clipping:
// at a norm of 0.2 the clipping changes the run, where 1 would leave it as it is).
std::vector<std::string> tiny(const std::string& flavour, std::vector<std::string> more) {
  std::vector<std::string> a = {"train",         kStory,  "--vocab",        kVocab, "--epochs",     "2",
                                "--eval-freq",   "4",     "--eval-iter",    "2",    "--new-tokens", "6",
                                "--dropout-rng", flavour, "--warmup-steps", "10",   "--max-norm",   "0.2",
                                "--lr",          "3e-3"};
  if (std::find(more.begin(), more.end(), "--resume") == more.end())  // a checkpoint has its sizes
    a.insert(a.end(), {"--vocab-size", "512", "--context-length", "16", "--emb-dim", "16", "--heads", "2",
                       "--layers", "1"});
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::vector<std::string> without_checkpoint_line(const std::string& out) {
  std::vector<std::string> lines = lines_of(out);
  lines.erase(std::remove_if(lines.begin(), lines.end(),
                             [](const std::string& l) { return l.rfind("checkpoint: ", 0) == 0; }),
              lines.end());
  return lines;
}

}  // namespace

TEST_CASE("train cli: --stop-after, then --resume, prints the straight run's lines and ends on its bits") {
  for (const std::string flavour : {"cpu", "mkl"}) {
    CAPTURE(flavour);
    const fs::path whole = temp_dir("whole"), half = temp_dir("half");
    const test::Run straight = test::cli(tiny(flavour, {"--out", whole.string()}));
    CAPTURE(straight.err);
    REQUIRE(straight.status == 0);
    // stopped mid-epoch 1 (the story gives 84 batches an epoch), then resumed
    const test::Run first = test::cli(tiny(flavour, {"--out", half.string(), "--stop-after", "58"}));
    CAPTURE(first.err);
    REQUIRE(first.status == 0);
    const test::Run second = test::cli(tiny(flavour, {"--resume", half.string(), "--out", half.string()}));
    CAPTURE(second.err);
    REQUIRE(second.status == 0);
    CHECK(second.err.empty());
    std::vector<std::string> joined = without_checkpoint_line(first.out);
    for (const std::string& l : without_checkpoint_line(second.out)) joined.push_back(l);
    CHECK(joined == without_checkpoint_line(straight.out));
    CHECK(lines_of(first.out).size() > 3);
    // the same parameters, AdamW moments and run state, to the byte
    CHECK(file_bytes(half / "model.safetensors") == file_bytes(whole / "model.safetensors"));
    CHECK(file_bytes(half / "optimizer.safetensors") == file_bytes(whole / "optimizer.safetensors"));

    // a checkpoint without run state (an older one) still resumes, and says the stream restarts
    TrainModel m;
    AdamW opt;
    bool has_optimizer = false;
    REQUIRE(read_checkpoint(half.string(), m, opt, has_optimizer).is_ok());
    REQUIRE(write_checkpoint(half.string(), m, opt, "").is_ok());
    const test::Run old = test::cli(tiny(flavour, {"--resume", half.string()}));
    CAPTURE(old.err);
    CHECK(old.status == 0);
    CHECK(old.err.find("has no run state") != std::string::npos);
    CHECK(old.err.find("restarts from --seed at epoch 1") != std::string::npos);
    REQUIRE_FALSE(lines_of(old.out).empty());
    CHECK(lines_of(old.out).front().rfind("Ep 1 (Step 000000)", 0) == 0);
    // other data: the stream restarts too, and says why
    const test::Run other = test::cli(tiny(flavour, {"--resume", whole.string(), "--batch-size", "3"}));
    CAPTURE(other.err);
    CHECK(other.status == 0);
    CHECK(
        other.err.find("'s run was over other data (168 training windows of batch 2, against 168 of 3 now") !=
        std::string::npos);
    fs::remove_all(whole);
    fs::remove_all(half);
  }
  check_refused(tiny("gpu", {}), "--dropout-rng 'gpu' is not cpu or mkl");
  check_refused(tiny("cpu", {"--stop-after", "0"}), "--stop-after must be at least 1");
  check_refused({"train", "--task", "induction", "--stop-after", "0"}, "--stop-after must be at least 1");
}

namespace {

// A small induction run (d_model 32, batch 8: a few hundred ms), JSON lines.
std::vector<std::string> small_induction(std::vector<std::string> more, const std::string& steps = "40") {
  std::vector<std::string> a = {"train", "--task", "induction", "--json"};
  if (std::find(more.begin(), more.end(), "--resume") == more.end())  // a checkpoint has its settings
    a.insert(a.end(), {"--steps", steps, "--eval-freq", "10", "--emb-dim", "32", "--batch-size", "8"});
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

json done_event(const std::string& out) {
  const std::vector<std::string> lines = lines_of(out);
  REQUIRE_FALSE(lines.empty());
  return json::parse(lines.back());
}

}  // namespace

TEST_CASE(
    "train cli: --task induction --stop-after, then --resume, gives the straight run's scores and bits") {
  std::vector<std::vector<json>> straights;
  // without dropout, and with it (the model's generator draws the masks, in the other flavour)
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--drop-rate", "0.1", "--dropout-rng", "mkl"}}) {
    CAPTURE(extra.size());
    const fs::path whole = temp_dir("ind_whole"), half = temp_dir("ind_half");
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"--out", whole.string()});
    const test::Run straight = test::cli(small_induction(args));
    CAPTURE(straight.err);
    REQUIRE(straight.status == 0);
    args = extra;
    args.insert(args.end(), {"--out", half.string(), "--stop-after", "25"});  // between two evaluations
    const test::Run first = test::cli(small_induction(args));
    CAPTURE(first.err);
    REQUIRE(first.status == 0);
    CHECK(done_event(first.out)["steps"] == 25);
    // every setting comes from the checkpoint, --dropout-rng included
    const test::Run second = test::cli(small_induction({"--resume", half.string(), "--out", half.string()}));
    CAPTURE(second.err);
    REQUIRE(second.status == 0);
    CHECK(second.err.empty());

    const std::vector<json> want = test::eval_events(straight.out), before = test::eval_events(first.out),
                            after = test::eval_events(second.out);
    REQUIRE(want.size() == 5);  // steps 0, 10, 20, 30, 40
    REQUIRE(before.size() == 3);
    REQUIRE(after.size() == 2);
    CHECK(after[0]["step"] == 30);
    std::vector<json> joined = before;
    joined.insert(joined.end(), after.begin(), after.end());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(joined[i].dump() == want[i].dump());  // every digit
    const json done = done_event(second.out);
    CHECK(done["steps"] == 40);
    CHECK(done["resumed_run"] == true);
    CHECK(done["resumed_optimizer"] == true);
    CHECK(done["first_induction_step"] == done_event(straight.out)["first_induction_step"]);
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json"}) {
      INFO(file);
      CHECK(file_bytes(half / file) == file_bytes(whole / file));
    }
    straights.push_back(want);

    if (extra.empty()) {
      // --steps, the run's total, may grow: the finished run goes on as a longer straight run would
      const test::Run longer = test::cli(small_induction({}, "50"));
      REQUIRE(longer.status == 0);
      const test::Run more = test::cli(small_induction({"--resume", whole.string(), "--steps", "50"}));
      CAPTURE(more.err);
      REQUIRE(more.status == 0);
      const std::vector<json> tail = test::eval_events(more.out), full = test::eval_events(longer.out);
      REQUIRE(tail.size() == 1);
      REQUIRE(full.size() == 6);
      CHECK(tail[0].dump() == full[5].dump());

      // a setting given with another value is refused by name; so is a total the run has reached
      const auto refused = [&](const std::vector<std::string>& flags, const std::string& needle) {
        std::vector<std::string> a = {"train", "--task", "induction", "--resume", half.string()};
        a.insert(a.end(), flags.begin(), flags.end());
        check_refused(a, needle);
      };
      refused({"--lr", "1e-3"}, "--lr 0.001 is not the run's 0.002 in '" + half.string() +
                                    "': --resume continues the same run (leave --lr out to keep its value)");
      refused({"--batch-size", "4"}, "--batch-size 4 is not the run's 8 in ");
      refused({"--weight-decay", "0.1"}, "--weight-decay 0.1 is not the run's 0 in ");
      refused({"--fixed-distance", "20"}, "--fixed-distance 20 is not the run's 0 in ");
      refused({}, "'s run has taken 40 steps: --steps (the run's total) must be more");
      refused({"--steps", "30"}, "'s run has taken 40 steps: --steps (the run's total) must be more");
      refused({"--emb-dim", "64"}, "--emb-dim does not apply to --resume: the checkpoint has its sizes");
      // the same values given again are no change
      const test::Run same =
          test::cli(small_induction({"--resume", half.string(), "--out", half.string(), "--steps", "41",
                                     "--lr", "2e-3", "--batch-size", "8", "--eval-freq", "1"}));
      CAPTURE(same.err);
      CHECK(same.status == 0);
      CHECK(test::eval_events(same.out).size() == 1);

      // a run state whose task does not fit the model is refused on reading
      TrainModel m;
      AdamW opt;
      bool has_optimizer = false;
      std::optional<RunState> run;
      REQUIRE(read_checkpoint(half.string(), m, opt, has_optimizer, run).is_ok());
      REQUIRE(run.has_value());
      CHECK(run->task == RunTask::induction);
      CHECK(run->induction.steps == 41);
      CHECK(run->induction.eval_freq == 1);
      RunState wide = *run;
      wide.induction.task.vocab = m.config().gpt.vocab_size + 1;
      REQUIRE(write_checkpoint(half.string(), m, opt, "", &wide).is_ok());
      refused({}, "its run state's task (" + std::to_string(wide.induction.task.vocab) +
                      " tokens, sequences of " + std::to_string(wide.induction.task.tokens) +
                      ") does not fit the model's vocabulary");

      // a checkpoint without run state (an older one) resumes as the book's does: its model and optimizer
      // go on from step 0 of a stream drawn from --seed, and it says so
      REQUIRE(write_checkpoint(whole.string(), m, opt, "").is_ok());
      REQUIRE(read_checkpoint(whole.string(), m, opt, has_optimizer, run).is_ok());
      CHECK_FALSE(run.has_value());
      const test::Run old =
          test::cli(small_induction({"--resume", whole.string(), "--steps", "10", "--eval-freq", "10"}));
      CAPTURE(old.err);
      CHECK(old.status == 0);
      CHECK(old.err.find("has no run state") != std::string::npos);
      CHECK(old.err.find("restarts from --seed at step 0") != std::string::npos);
      CHECK(std::count(old.err.begin(), old.err.end(), '\n') == 1);
      const std::vector<json> again = test::eval_events(old.out);
      REQUIRE(again.size() == 2);
      CHECK(again[0]["step"] == 0);
      // step 0 shows the checkpoint's model (step 41 of the split run): the probes see the same heads
      CHECK(again[0]["heads"].dump() == test::eval_events(same.out)[0]["heads"].dump());
      CHECK(done_event(old.out)["resumed_run"] == false);
      CHECK(done_event(old.out)["resumed_optimizer"] == true);
    }
    fs::remove_all(whole);
    fs::remove_all(half);
  }
  REQUIRE(straights.size() == 2);
  CHECK(straights[0][4].dump() != straights[1][4].dump());  // the dropout run did draw
}

TEST_CASE("train cli: an induction run state is untrusted: each bad value is one line") {
  RunState r;
  r.task = RunTask::induction;
  r.batch_size = 8, r.rng = TorchGenerator(3).state(), r.dropout_rng = DropoutRng::mkl;
  InductionRunState& n = r.induction;
  n.task.vocab = 64, n.task.tokens = 64, n.task.fixed_distance = 30;
  n.steps = 20, n.total_steps = 40, n.eval_freq = 10, n.lr = 3e-3, n.weight_decay = 0.1,
  n.first_induction = 10;
  n.data_rng = TorchGenerator(4).state();
  const std::map<std::string, std::string> good = run_state_metadata(r);
  CHECK(good.at("run.task") == "induction");
  std::optional<RunState> out;
  REQUIRE(parse_run_state(good, out).is_ok());
  REQUIRE(out.has_value());
  CHECK(out->task == RunTask::induction);
  CHECK(out->rng == r.rng);
  CHECK(out->dropout_rng == DropoutRng::mkl);
  CHECK(out->batch_size == 8);
  CHECK(out->induction.data_rng == n.data_rng);
  CHECK(out->induction.steps == 20);
  CHECK(out->induction.total_steps == 40);
  CHECK(out->induction.eval_freq == 10);
  CHECK(out->induction.lr == 3e-3);
  CHECK(out->induction.weight_decay == 0.1);
  CHECK(out->induction.first_induction == 10);
  CHECK(out->induction.task.fixed_distance == 30);
  CHECK(out->induction.task.max_repeat == n.task.max_repeat);
  std::map<std::string, std::string> none = good;
  none["run.first_induction"] = "none";
  REQUIRE(parse_run_state(none, out).is_ok());
  CHECK(out->induction.first_induction == -1);

  // a book run's metadata (no run.task) reads as the book's, and so does an explicit "book"
  RunState book;
  book.position.global_step = 1, book.position.tokens_seen = 2 * 2 * 8, book.position.batch = 2;
  book.batch_size = 2, book.train_windows = 4, book.val_windows = 1, book.rng = TorchGenerator(5).state();
  std::map<std::string, std::string> bm = run_state_metadata(book);
  CHECK(bm.count("run.task") == 0);
  REQUIRE(parse_run_state(bm, out).is_ok());
  CHECK(out->task == RunTask::book);
  bm["run.task"] = "book";
  REQUIRE(parse_run_state(bm, out).is_ok());
  CHECK(out->task == RunTask::book);

  const auto refused = [&good](const std::string& key, const std::string& value, const std::string& error) {
    test::check_run_state_refused(good, key, value, error);
  };
  refused("run.task", "gpt", "its run.task is 'gpt', not book or induction");
  refused("run.total_steps", "(none)", "its run state has no run.total_steps");
  refused("run.global_step", "41", "its run state has taken 41 steps, more than its total of 40");
  refused("run.global_step", "+1", "its run.global_step is '+1', not a whole number up to 2147483647");
  refused("run.eval_freq", "0",
          "its run state's batch size, evaluation frequency and total steps must be at least 1");
  refused("run.batch_size", "0",
          "its run state's batch size, evaluation frequency and total steps must be at least 1");
  refused("run.vocab", "1", "its run state's task: the task's vocabulary must be 2 .. 1048576 tokens");
  refused("run.min_repeat", "30",
          "its run state's task: the repeat lengths must satisfy 1 <= min <= max and 2 min <= tokens + 1");
  refused(
      "run.fixed_distance", "2",
      "its run state's task: a fixed distance must be at least the shortest repeat (4) and leave room for "
      "one copy in 64 tokens");
  for (const char* lr :
       {"0", "-1e-3", " 1e-3", "1e-3 ", "inf", "nan", "0x1p-9", "1e999", "1.", ".5", "1e", ""})
    refused("run.lr", lr, "its run.lr is '" + std::string(lr) + "', not a positive number");
  refused("run.weight_decay", "-0.1", "its run.weight_decay is '-0.1', not a number of 0 or more");
  refused("run.first_induction", "21", "its run.first_induction is '21', not none or a step up to 20");
  refused("run.first_induction", "None", "its run.first_induction is 'None', not none or a step up to 20");
  refused("run.dropout_rng", "gpu", "its run.dropout_rng is 'gpu', not cpu or mkl");
  refused("run.data_rng_state", "00", "its run.data_rng_state is not 10112 lowercase hex digits");
  refused("run.rng_state", "(none)", "its run state has no run.rng_state");
  std::string bad = good.at("run.data_rng_state");
  bad.replace(bad.size() - 8, 8, "ffffffff");  // a cached float normal sample, which set_state refuses
  std::map<std::string, std::string> m = good;
  m["run.data_rng_state"] = bad;
  const Status st = parse_run_state(m, out);
  CHECK(st.error.rfind("its run.data_rng_state: ", 0) == 0);
  CHECK_FALSE(out.has_value());
}

namespace {

// A book run's settings read back field by field.
void check_settings(const BookRunSettings& got, const BookRunSettings& want) {
  CHECK(got.epochs == want.epochs);
  CHECK(got.eval_freq == want.eval_freq);
  CHECK(got.eval_iter == want.eval_iter);
  CHECK(got.lr == want.lr);
  CHECK(got.weight_decay == want.weight_decay);
  CHECK(got.use_schedule == want.use_schedule);
  CHECK(got.schedule.warmup_steps == want.schedule.warmup_steps);
  CHECK(got.schedule.initial_lr == want.schedule.initial_lr);
  CHECK(got.schedule.min_lr == want.schedule.min_lr);
  CHECK(got.schedule.max_norm == want.schedule.max_norm);
}

}  // namespace

TEST_CASE("train cli: a run's settings are in its checkpoint: --resume without them is the straight run") {
  const fs::path whole = temp_dir("sched_whole"), half = temp_dir("sched_half"), old = temp_dir("sched_old");
  const test::Run straight = test::cli(tiny("cpu", {"--out", whole.string()}));
  CAPTURE(straight.err);
  REQUIRE(straight.status == 0);
  const test::Run first = test::cli(tiny("cpu", {"--out", half.string(), "--stop-after", "58"}));
  REQUIRE(first.status == 0);
  // the v1 form of the same checkpoint (no settings), for the older checkpoints' note below
  {
    TrainModel m;
    AdamW opt;
    bool has_optimizer = false;
    std::optional<RunState> run;
    REQUIRE(read_checkpoint(half.string(), m, opt, has_optimizer, run).is_ok());
    REQUIRE(run.has_value());
    REQUIRE(run->settings.has_value());
    BookRunSettings want;  // tiny()'s flags
    want.epochs = 2, want.eval_freq = 4, want.eval_iter = 2, want.lr = 3e-3, want.weight_decay = 0.1;
    want.use_schedule = true, want.schedule.warmup_steps = 10, want.schedule.initial_lr = 3e-5;
    want.schedule.min_lr = 1e-6, want.schedule.max_norm = 0.2;
    check_settings(*run->settings, want);
    run->settings.reset();
    REQUIRE(write_checkpoint(old.string(), m, opt, "", &*run).is_ok());
  }
  // no flag but the text, the tokenizer and the sample's length (not part of the run): the schedule,
  // clipping, lr, epochs, evaluations and dropout flavour are the checkpoint's
  const test::Run second = test::cli({"train", kStory, "--vocab", kVocab, "--resume", half.string(), "--out",
                                      half.string(), "--new-tokens", "6"});
  CAPTURE(second.err);
  REQUIRE(second.status == 0);
  CHECK(second.err.empty());
  std::vector<std::string> joined = without_checkpoint_line(first.out);
  for (const std::string& l : without_checkpoint_line(second.out)) joined.push_back(l);
  CHECK(joined == without_checkpoint_line(straight.out));
  CHECK(file_bytes(half / "model.safetensors") == file_bytes(whole / "model.safetensors"));
  CHECK(file_bytes(half / "optimizer.safetensors") == file_bytes(whole / "optimizer.safetensors"));

  // an older (version 1) checkpoint goes on with the flags given, and says so
  const test::Run v1 = test::cli(tiny("cpu", {"--resume", old.string(), "--out", old.string()}));
  CAPTURE(v1.err);
  REQUIRE(v1.status == 0);
  CHECK(v1.err ==
        "attnviz-cli train: '" + old.string() +
            "''s run state does not record its learning rate, weight decay or schedule (written before they "
            "were): it goes on with the flags given\n");
  CHECK(file_bytes(old / "model.safetensors") == file_bytes(whole / "model.safetensors"));

  // a flag given with another value is refused by name (the finished run's checkpoint: these come first)
  const auto refused = [&](std::vector<std::string> more, const std::string& needle) {
    std::vector<std::string> a = {"train", kStory, "--vocab", kVocab, "--resume", whole.string()};
    a.insert(a.end(), more.begin(), more.end());
    check_refused(a, needle);
  };
  const std::string in = " in '" + whole.string() + "': ";
  refused({"--lr", "2e-3"}, "--lr 0.002 is not the run's 0.003" + in +
                                "--resume continues the same run (leave --lr out to keep its value)");
  refused({"--weight-decay", "0"}, "--weight-decay 0 is not the run's 0.1" + in);
  refused({"--max-norm", "1"}, "--max-norm 1 is not the run's 0.2" + in);
  refused({"--warmup-steps", "5"}, "--warmup-steps 5 is not the run's 10" + in);
  refused({"--initial-lr", "0"}, "--initial-lr 0 is not the run's 3e-05" + in);
  refused({"--min-lr", "1e-5"}, "--min-lr 1e-05 is not the run's 1e-06" + in);
  refused({"--eval-freq", "5"},
          "--eval-freq 5 is not the run's 4" + in +
              "an evaluation draws from the generator, so --resume continues the same run");
  refused({"--epochs", "3"}, "--epochs 3 is not the run's 2" + in +
                                 "its learning rate decays over the run's 2 epochs (168 steps), so --resume "
                                 "keeps the total (leave --epochs out to keep its value)");
  // the same values are accepted; the finished run is then refused as before
  refused({"--lr", "3e-3", "--max-norm", "0.2", "--epochs", "2"},
          "'s run has done 2 epochs: --epochs (the run's total) must be more");

  // a run at a constant learning rate: no schedule flag applies, and its total may grow
  const fs::path flat = temp_dir("sched_flat");
  REQUIRE(test::cli(reduced({"--epochs", "1", "--stop-after", "3", "--out", flat.string()})).status == 0);
  check_refused({"train", kStory, "--vocab", kVocab, "--resume", flat.string(), "--max-norm", "1"},
                "--max-norm does not apply to '" + flat.string() +
                    "': its run's learning rate is constant, and --resume continues the same run");
  // a new run's warmup must fit in it, and the schedule's rates may not be negative
  check_refused(reduced({"--epochs", "1", "--warmup-steps", "43"}),
                "--warmup-steps 43 is more than the run's 42 steps");
  check_refused(tiny("cpu", {"--min-lr", "-1"}), "--min-lr must be 0 or more");
  for (const fs::path& p : {whole, half, old, flat}) fs::remove_all(p);
}

TEST_CASE("train cli: a book run's settings are untrusted: each bad value is one line") {
  RunState r;
  r.position.epoch = 1, r.position.batch = 2, r.position.global_step = 6, r.position.tokens_seen = 7 * 2 * 16;
  r.batch_size = 2, r.train_windows = 10, r.val_windows = 1, r.rng = TorchGenerator(3).state();
  BookRunSettings b;
  b.epochs = 3, b.eval_freq = 4, b.eval_iter = 2, b.lr = 3e-3, b.weight_decay = 0.05, b.use_schedule = true;
  b.schedule.warmup_steps = 10, b.schedule.initial_lr = 1e-4, b.schedule.min_lr = 0, b.schedule.max_norm = 1;
  r.settings = b;
  const std::map<std::string, std::string> good = run_state_metadata(r);
  CHECK(good.at("run.version") == "2");
  CHECK(good.at("run.schedule") == "warmup_cosine");
  std::optional<RunState> out;
  REQUIRE(parse_run_state(good, out).is_ok());
  REQUIRE(out.has_value());
  REQUIRE(out->settings.has_value());
  check_settings(*out->settings, b);
  // a constant learning rate writes no schedule keys, and reads back without a schedule
  RunState flat = r;
  flat.settings->use_schedule = false;
  std::map<std::string, std::string> fm = run_state_metadata(flat);
  CHECK(fm.count("run.warmup_steps") == 0);
  REQUIRE(parse_run_state(fm, out).is_ok());
  CHECK_FALSE(out->settings->use_schedule);
  fm["run.max_norm"] = "1";
  test::check_run_state_refused(fm, "run.max_norm", "1",
                                "its run state has run.max_norm but a constant learning rate");
  // version 1 (no settings) reads as before, without them
  RunState v1 = r;
  v1.settings.reset();
  REQUIRE(parse_run_state(run_state_metadata(v1), out).is_ok());
  CHECK_FALSE(out->settings.has_value());

  const auto refused = [&good](const std::string& key, const std::string& value, const std::string& error) {
    test::check_run_state_refused(good, key, value, error);
  };
  refused("run.version", "3", "its run state is version '3', not 1 or 2");
  refused("run.epochs", "(none)", "its run state has no run.epochs");
  refused("run.epochs", "0",
          "its run state's epochs, evaluation frequency and evaluation batches must be at least 1");
  refused("run.eval_iter", "0",
          "its run state's epochs, evaluation frequency and evaluation batches must be at least 1");
  refused("run.epochs", "1", "its run state has taken 7 steps, more than its 1 epochs of 5 batches");
  refused("run.epochs", "2147483647",
          "its run state's 2147483647 epochs of 5 batches are more than 2147483647 steps");
  refused("run.lr", "0", "its run.lr is '0', not a positive number");
  refused("run.lr", "nan", "its run.lr is 'nan', not a positive number");
  refused("run.weight_decay", "-1", "its run.weight_decay is '-1', not a number of 0 or more");
  refused("run.schedule", "cosine", "its run.schedule is 'cosine', not constant or warmup_cosine");
  refused("run.schedule", "(none)", "its run state has no run.schedule");
  refused("run.warmup_steps", "16", "its run.warmup_steps 16 is more than the run's 15 steps");
  refused("run.warmup_steps", "-1", "its run.warmup_steps is '-1', not a whole number up to 2147483647");
  refused("run.initial_lr", "-1e-4", "its run.initial_lr is '-1e-4', not a number of 0 or more");
  refused("run.min_lr", "inf", "its run.min_lr is 'inf', not a number of 0 or more");
  refused("run.max_norm", "(none)", "its run state has no run.max_norm");
}

// ---- A checkpoint is a set, written whole or not at all (checkpoint.json) --------------------------------

namespace {

// Every regular file of a folder and its bytes (sub-folders left out).
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().filename().string()] = file_bytes(e.path());
  return files;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
  REQUIRE(f.good());
}

// The run a set test starts from: the reduced book run stopped after `steps`, with GPT-2's vocabulary
// (encoder.json + vocab.bpe, saved as vocab.json + merges.txt).
std::map<std::string, std::string> book_checkpoint(const fs::path& dir, int steps) {
  const test::Run r =
      test::cli(reduced({"--epochs", "1", "--stop-after", std::to_string(steps), "--out", dir.string()}));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return folder_files(dir);
}

// The run state a resumed checkpoint holds, as a number: its global step (-1: none).
int resumed_step(const fs::path& dir) {
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  std::optional<RunState> run;
  const Status st = read_checkpoint(dir.string(), m, opt, has_optimizer, run);
  CAPTURE(st.error);
  REQUIRE(st.is_ok());
  return run ? static_cast<int>(run->position.global_step) : -1;
}

// The reduced book run resumed from `dir` (the checkpoint has its sizes), with `more`.
std::vector<std::string> resume_from(const std::string& dir, std::vector<std::string> more) {
  std::vector<std::string> a = {"train", kStory, "--vocab", kVocab, "--resume", dir};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const char* const kSet[] = {"model.safetensors", "config.json", "optimizer.safetensors", "vocab.json",
                            "merges.txt"};

}  // namespace

TEST_CASE("train cli: checkpoint: a write that fails at any file leaves the previous set as it was") {
  const fs::path dir = temp_dir("set_fail");
  const std::map<std::string, std::string> before = book_checkpoint(dir, 3);
  REQUIRE(before.count("checkpoint.json") == 1);
  for (const char* name : kSet) REQUIRE(before.count(name) == 1);
  CHECK(resumed_step(dir) == 2);

  // In the CLI: the disk filling at each file in turn, after a resumed run has trained on (the hook fails
  // the write there, as ENOSPC would); and a folder in a NAME.tmp's place, refused before training.
  for (const char* name : kSet) {
    CAPTURE(name);
    set_checkpoint_write_hook([&](const std::string& file) {
      return file == name ? Status::fail("cannot write " + file + ": No space left on device") : Status::ok();
    });
    const test::Run r = test::cli(resume_from(dir.string(), {"--out", dir.string(), "--stop-after", "6"}));
    set_checkpoint_write_hook({});
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(r.out.find("(Step 000005)") != std::string::npos);  // it trained, then the write failed
    CHECK(r.err.find("No space left on device") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(folder_files(dir) == before);  // byte for byte, and no NAME.tmp left behind
    CHECK(resumed_step(dir) == 2);

    const fs::path blocker = dir / (std::string(name) + ".tmp");
    fs::create_directory(blocker);
    check_refused(
        resume_from(dir.string(), {"--out", dir.string(), "--stop-after", "6"}),
        quote(dir.string()) + " holds a folder named " + name + ".tmp, where the checkpoint writes a file");
    fs::remove(blocker);
    CHECK(folder_files(dir) == before);
  }
  for (const char* name : {"checkpoint.json", "checkpoint.pending.json"}) {
    fs::remove_all(dir);
    book_checkpoint(dir, 3);
    fs::remove(dir / name);
    fs::create_directory(dir / name);
    // (read first, as the folder's set: refused before training)
    check_refused(reduced({"--out", dir.string()}),
                  "cannot read " + quote((dir / name).string()) + ": is a directory");
  }
  fs::remove_all(dir);
  REQUIRE(book_checkpoint(dir, 3) == before);

  // In the engine: the disk filling after each file in turn (the hook fails the write there).
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  std::optional<RunState> run;
  REQUIRE(read_checkpoint(dir.string(), m, opt, has_optimizer, run).is_ok());
  opt.steps += 1;  // another save: its optimizer file differs
  m.params().each([](const std::string&, Tensor& t) { t.ptr()[0] += 1.0f; });
  for (const char* name : kSet) {
    CAPTURE(name);
    int written = 0;
    set_checkpoint_write_hook([&](const std::string& file) {
      ++written;
      return file == name ? Status::fail("cannot write " + file + ": No space left on device") : Status::ok();
    });
    const Status st = write_checkpoint(dir.string(), m, opt, kVocab, &*run);
    set_checkpoint_write_hook({});
    CHECK_FALSE(st.is_ok());
    CHECK(st.error.find("No space left on device") != std::string::npos);
    CHECK(written >= 1);
    CHECK(folder_files(dir) == before);
    CHECK(resumed_step(dir) == 2);
  }
  // and the same write, unhindered, replaces the whole set
  REQUIRE(write_checkpoint(dir.string(), m, opt, kVocab, &*run).is_ok());
  const std::map<std::string, std::string> after = folder_files(dir);
  CHECK(after.at("model.safetensors") != before.at("model.safetensors"));
  CHECK(after.at("optimizer.safetensors") != before.at("optimizer.safetensors"));
  CHECK(after.at("checkpoint.json") != before.at("checkpoint.json"));
  CHECK(after.size() == before.size());
  fs::remove_all(dir);
}

TEST_CASE(
    "train cli: checkpoint: a torn set is refused by name, a write cut short after its commit finished") {
  const fs::path a = temp_dir("set_a"), b = temp_dir("set_b"), dir = temp_dir("set_torn");
  const std::map<std::string, std::string> first = book_checkpoint(a, 3), second = book_checkpoint(b, 5);

  // One file of another save, cut short, grown, or with one byte changed: refused by --resume, --model and
  // --out alike, naming the file.
  for (const char* name : kSet) {
    const std::string& mine = first.at(name);
    std::vector<std::pair<std::string, std::string>> variants = {
        {"cut", mine.substr(0, mine.size() / 2)},
        {"grown", mine + "x"},
        {"flipped", mine.substr(0, mine.size() / 3) + static_cast<char>(mine[mine.size() / 3] ^ 0x20) +
                        mine.substr(mine.size() / 3 + 1)}};
    if (second.at(name) != mine) variants.push_back({"other save", second.at(name)});
    for (const auto& variant : variants) {
      const std::string& how = variant.first;  // (a structured binding cannot be captured in C++17)
      const std::string& bytes = variant.second;
      CAPTURE(name);
      CAPTURE(how);
      fs::remove_all(dir);
      fs::copy(a, dir);
      write_bytes(dir / name, bytes);
      const std::string torn = quote(dir.string()) + " is a torn checkpoint: its " + name;
      check_refused(resume_from(dir.string(), {"--stop-after", "6"}), torn);
      check_refused_cli({"--model", dir.string(), "--text", "Every effort"}, torn);
    }
    // missing
    fs::remove_all(dir);
    fs::copy(a, dir);
    fs::remove(dir / name);
    check_refused(resume_from(dir.string(), {}),
                  quote(dir.string()) + " is a torn checkpoint: its " + name + " is missing");
  }
  // an optimizer.safetensors the set does not list (a model-only save's folder given one of another)
  fs::remove_all(dir);
  fs::copy(a, dir);
  {
    TrainModel m;
    AdamW opt, none;
    bool has_optimizer = false;
    REQUIRE(read_checkpoint(a.string(), m, opt, has_optimizer).is_ok());
    REQUIRE(write_checkpoint(dir.string(), m, none, kVocab).is_ok());  // no step taken: no optimizer file
    CHECK_FALSE(fs::exists(dir / "optimizer.safetensors"));            // the old set's, removed
    write_bytes(dir / "optimizer.safetensors", first.at("optimizer.safetensors"));
    check_refused(resume_from(dir.string(), {}),
                  "holds optimizer.safetensors, which its checkpoint.json does not list");
  }

  // A write cut short after its commit point (checkpoint.pending.json written), after any number of its
  // renames: the next read finishes it to the new set, byte for byte.
  std::vector<std::string> names;
  for (const auto& [name, bytes] : second)
    if (name != "checkpoint.json") names.push_back(name);
  for (std::size_t renamed = 0; renamed <= names.size(); ++renamed) {
    CAPTURE(renamed);
    fs::remove_all(dir);
    fs::copy(a, dir);
    for (std::size_t i = 0; i < names.size(); ++i)
      write_bytes(dir / (names[i] + (i < renamed ? "" : ".tmp")), second.at(names[i]));
    write_bytes(dir / "checkpoint.pending.json", second.at("checkpoint.json"));
    CHECK(resumed_step(dir) == 4);
    CHECK(folder_files(dir) == second);
  }
  // ... unless its files do not match it: refused, naming the file
  fs::remove_all(dir);
  fs::copy(a, dir);
  write_bytes(dir / "checkpoint.pending.json", second.at("checkpoint.json"));
  for (const std::string& name : names) write_bytes(dir / (name + ".tmp"), second.at(name));
  fs::remove(dir / "optimizer.safetensors.tmp");
  check_refused(resume_from(dir.string(), {}),
                "cannot be finished: its optimizer.safetensors holds other bytes than its "
                "checkpoint.pending.json lists");

  // NAME.tmp files without a pending manifest: a write abandoned before its commit, ignored, then replaced
  fs::remove_all(dir);
  fs::copy(a, dir);
  for (const std::string& name : names) write_bytes(dir / (name + ".tmp"), "half a file");
  CHECK(resumed_step(dir) == 2);
  const test::Run more = test::cli(resume_from(dir.string(), {"--out", dir.string(), "--stop-after", "6"}));
  CAPTURE(more.err);
  REQUIRE(more.status == 0);
  CHECK(folder_files(dir).size() == first.size());  // the .tmp files are gone
  CHECK(resumed_step(dir) == 5);
  for (const fs::path& p : {a, b, dir}) fs::remove_all(p);
}

TEST_CASE("train cli: checkpoint: checkpoint.json is untrusted") {
  const fs::path a = temp_dir("manifest_a"), dir = temp_dir("manifest");
  const std::map<std::string, std::string> first = book_checkpoint(a, 3);
  const json good = json::parse(first.at("checkpoint.json"));
  std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {"{\"format\": \"attnviz checkpoint\"", "not a JSON object"},
  };
  const auto with = [&](const std::function<void(json&)>& change, const std::string& why) {
    json j = good;
    change(j);
    bad.push_back({j.dump(), why});
  };
  with([](json& j) { j["extra"] = 1; }, "unknown key 'extra'");
  with([](json& j) { j["format"] = "safetensors"; }, "its format is not");
  with([](json& j) { j["version"] = 2; }, "its version is not 1");
  with([](json& j) { j["version"] = -1; }, "its version is not 1");
  with([](json& j) { j["id"] = "xyz"; }, "its id is not 16 hex digits");
  with([](json& j) { j.erase("files"); }, "no \"files\" object");
  with([](json& j) { j["files"]["../model.safetensors"] = j["files"]["config.json"]; },
       "it lists '../model.safetensors', no file of a checkpoint");
  with([](json& j) { j["files"]["pytorch_model.bin"] = j["files"]["config.json"]; },
       "it lists 'pytorch_model.bin'");
  with([](json& j) { j["files"].erase("model.safetensors"); }, "does not list model.safetensors");
  with([](json& j) { j["files"]["config.json"]["bytes"] = -3; }, "config.json's entry is not");
  with([](json& j) { j["files"]["config.json"]["bytes"] = 1.5; }, "config.json's entry is not");
  with([](json& j) { j["files"]["config.json"]["hash"] = "0x12"; }, "config.json's entry is not");
  with([](json& j) { j["files"]["config.json"]["hash"] = std::string(16, 'G'); },
       "config.json's entry is not");
  with([](json& j) { j["files"]["config.json"]["extra"] = 1; }, "config.json's entry is not");
  with([](json& j) { j["files"]["config.json"]["bytes"] = 1; }, "its config.json has 139 bytes, not the 1");
  for (const char* manifest : {"checkpoint.json", "checkpoint.pending.json"})
    for (const auto& entry : bad) {
      const auto& text = entry.first;  // (a structured binding cannot be captured in C++17)
      const auto& why = entry.second;
      CAPTURE(manifest);
      CAPTURE(text);
      fs::remove_all(dir);
      fs::copy(a, dir);
      write_bytes(dir / manifest, text);
      const test::Run r = test::cli(resume_from(dir.string(), {}));
      CAPTURE(r.err);
      CHECK(r.status == 1);
      CHECK(r.out.empty());
      CHECK(r.err.find(why) != std::string::npos);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  // a manifest that is a folder, not a file
  fs::remove_all(dir);
  fs::copy(a, dir);
  fs::remove(dir / "checkpoint.json");
  fs::create_directory(dir / "checkpoint.json");
  check_refused(resume_from(dir.string(), {}), "is a directory");
  for (const fs::path& p : {a, dir}) fs::remove_all(p);
}

TEST_CASE("train cli: checkpoint: --out is checked before the run trains") {
  const fs::path dir = temp_dir("out_check"), file = temp_dir("out_file");
  write_bytes(file, "a file");
  // not a folder, or under a file: refused before a step (nothing on stdout)
  check_refused(reduced({"--out", file.string()}), "it is not a folder");
  check_refused(reduced({"--out", (file / "sub").string()}), "cannot create the folder");
  check_refused({"train", "--task", "induction", "--steps", "3", "--out", file.string()},
                "it is not a folder");
  // a folder where no file can be written (the probe's name taken by a folder)
  fs::create_directories(dir / ".attnviz-write-probe.tmp");
  check_refused(reduced({"--out", dir.string()}), "cannot write a checkpoint to " + quote(dir.string()));
  fs::remove_all(dir);

  // a file a model loader would read as the checkpoint's own, which the run would not write
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> runs = {
      // the book run with GPT-2's vocabulary writes vocab.json and merges.txt
      {reduced({"--stop-after", "1"}),
       {"tokenizer.json", "encoder.json", "vocab.bpe", "model.safetensors.index.json"}},
      // the induction task writes no tokenizer
      {{"train", "--task", "induction", "--steps", "3"},
       {"tokenizer.json", "vocab.json", "merges.txt", "encoder.json", "vocab.bpe",
        "model.safetensors.index.json"}}};
  for (const auto& [args, foreign] : runs)
    for (const std::string& name : foreign) {
      CAPTURE(name);
      fs::create_directories(dir);
      write_bytes(dir / name, "{\"left\": \"by another run\"}");
      std::vector<std::string> with_out = args;
      with_out.insert(with_out.end(), {"--out", dir.string()});
      check_refused(with_out,
                    quote(dir.string()) + " holds " + name + ", which the checkpoint would not write");
      CHECK(folder_files(dir).size() == 1);  // nothing written
      fs::remove_all(dir);
    }

  // a folder with a checkpoint and a file it does not list: --model, --resume and --out refuse it
  book_checkpoint(dir, 2);
  write_bytes(dir / "tokenizer.json", file_bytes(fs::path(ATTNVIZ_FIXTURES_DIR) / "hub" / "tokenizer.json"));
  const std::string unlisted =
      quote(dir.string()) + " holds tokenizer.json, which its checkpoint.json does not list";
  check_refused_cli({"--model", dir.string(), "--text", "Every effort"}, unlisted);
  check_refused(resume_from(dir.string(), {}), unlisted);
  check_refused(reduced({"--out", dir.string()}),
                quote(dir.string()) + " holds tokenizer.json, which the checkpoint would not write");
  for (const fs::path& p : {dir, file}) fs::remove_all(p);
}

TEST_CASE("train cli: checkpoint: a tokenizer.json vocabulary is saved with the model, and opens with it") {
  const fs::path vocab = temp_dir("tokjson_vocab"), dir = temp_dir("tokjson_out");
  fs::create_directories(vocab);
  const std::string tokenizer = file_bytes(fs::path(ATTNVIZ_FIXTURES_DIR) / "hub" / "tokenizer.json");
  write_bytes(vocab / "tokenizer.json", tokenizer);
  std::vector<std::string> args = reduced({"--stop-after", "2", "--out", dir.string()});
  *(std::find(args.begin(), args.end(), "--vocab") + 1) = vocab.string();
  const test::Run r = test::cli(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(file_bytes(dir / "tokenizer.json") == tokenizer);
  CHECK_FALSE(fs::exists(dir / "vocab.json"));
  CHECK(json::parse(file_bytes(dir / "checkpoint.json"))["files"].contains("tokenizer.json"));
  // --model DIR tokenizes with it: the same ids as the folder it came from
  const test::Run here = test::cli({"--model", dir.string(), "--text", "the cat sat", "--json"});
  const test::Run there =
      test::cli({"--model", dir.string(), "--vocab", vocab.string(), "--text", "the cat sat", "--json"});
  CAPTURE(here.err);
  REQUIRE(here.status == 0);
  REQUIRE(there.status == 0);
  CHECK(json::parse(here.out)["tokens"] == json::parse(there.out)["tokens"]);
  CHECK(resumed_step(dir) == 1);
  for (const fs::path& p : {vocab, dir}) fs::remove_all(p);
}

TEST_CASE("train cli: checkpoint: Ctrl-C while the set is written finishes it, then exits 130") {
  const fs::path dir = temp_dir("ctrl_c");
  const std::vector<std::vector<std::string>> runs = {
      reduced({"--epochs", "1", "--stop-after", "4", "--out", dir.string()}),
      {"train", "--task", "induction", "--steps", "3", "--out", dir.string()}};
  for (const std::vector<std::string>& args : runs)
    for (const char* at : {"model.safetensors", "config.json", "optimizer.safetensors"}) {
      CAPTURE(args[1]);
      CAPTURE(at);
      fs::remove_all(dir);
      std::atomic<bool> stop{false}, generating{false};
      GenerateControl control;
      control.stop = &stop;
      control.generating = &generating;
      bool held = false;
      // what cli_main's SIGINT handler does: record the stop while the flag is held, else end the program
      set_checkpoint_write_hook([&](const std::string& file) {
        if (file == at) {
          held = generating.load();
          if (held) stop.store(true);
        }
        return Status::ok();
      });
      std::ostringstream out, err;
      const int status = run_cli(args, out, err, control);
      set_checkpoint_write_hook({});
      CAPTURE(err.str());
      CHECK(held);
      CHECK(status == kStoppedStatus);
      CHECK(err.str().find("; the model so far is saved") != std::string::npos);
      CHECK_FALSE(generating.load());
      CHECK(check_checkpoint_folder(dir.string()).is_ok());
      TrainModel m;
      AdamW opt;
      bool has_optimizer = false;
      CHECK(read_checkpoint(dir.string(), m, opt, has_optimizer).is_ok());
      CHECK(has_optimizer);
    }
  fs::remove_all(dir);
}

TEST_CASE("train cli: checkpoint: --resume from a model that is no training checkpoint says so") {
  // every other architecture's fixture folder
  int others = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(ATTNVIZ_FIXTURES_DIR) / "arch")) {
    const json config = json::parse(file_bytes(e.path() / "config.json"));
    const std::string type = config["model_type"];
    CAPTURE(e.path().string());
    ++others;
    check_refused({"train", kStory, "--vocab", kVocab, "--resume", e.path().string()},
                  quote(e.path().string()) + " is a " + type + " model, not a training checkpoint");
    check_refused({"train", "--task", "induction", "--resume", e.path().string()},
                  " model, not a training checkpoint");
  }
  CHECK(others >= 5);
  // a GPT-2 model folder without an optimizer: trained on from its weights, and said so
  const std::string hf = (fs::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "hf-folder").string();
  const test::Run r = test::cli({"train", kStory, "--vocab", kVocab, "--resume", hf, "--stop-after", "1"});
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.find(quote(hf) + " is a GPT-2 model, not a training checkpoint (no optimizer.safetensors)") !=
        std::string::npos);
  CHECK(lines_of(r.out).size() == 1);
}

// ---- A checkpoint write never writes through a link or waits on a FIFO -----------------------------------

namespace {

// Entries that are not regular files, at a name a checkpoint writes or reads.
enum class Odd { link, fifo, device };
constexpr Odd kOdd[] = {Odd::link, Odd::fifo, Odd::device};

// How the checkpoint names one ("a symbolic link", as file_kind says).
std::string odd_kind(Odd kind) {
  return kind == Odd::link ? "a symbolic link" : kind == Odd::fifo ? "a FIFO" : "a character device";
}

// Puts at `p` a symbolic link to `target`, a FIFO, or a character device with /dev/null's numbers (false
// where mknod is not allowed: not root, or a container without the capability; and in WebAssembly, below).
bool make_odd(const fs::path& p, Odd kind, const fs::path& target) {
  fs::remove(p);
#ifdef __EMSCRIPTEN__
  // Emscripten's file system over node reports a FIFO or a device node as neither (refused all the same, as
  // a file of the wrong size), and the page has none: its files are copied into its own file system.
  if (kind != Odd::link) return false;
#endif
  switch (kind) {
    case Odd::link:
      fs::create_symlink(target, p);
      return true;
    case Odd::fifo:
      REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
      return true;
    case Odd::device: {
      struct stat null {};
      REQUIRE(::stat("/dev/null", &null) == 0);
      return ::mknod(p.c_str(), S_IFCHR | 0644, null.st_rdev) == 0;
    }
  }
  return false;
}

// Every entry of `dir` is a regular file, and none is a NAME.tmp left behind.
void check_only_set_files(const fs::path& dir) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    CAPTURE(name);
    CHECK(fs::is_regular_file(fs::symlink_status(e.path())));
    CHECK(name.find(".tmp") == std::string::npos);
  }
}

// The names a write creates its files at: each NAME.tmp of the set, the pending manifest's, the probe.
std::vector<std::string> temporary_names() {
  std::vector<std::string> names;
  for (const char* name : kSet) names.push_back(std::string(name) + ".tmp");
  names.push_back("checkpoint.pending.json.tmp");
  names.push_back(".attnviz-write-probe.tmp");
  return names;
}

}  // namespace

TEST_CASE(
    "train cli: checkpoint: a link, FIFO or device at a name the write creates is replaced, never written "
    "through or waited on") {
  const fs::path a = temp_dir("odd_write_a"), dir = temp_dir("odd_write"), outside = temp_dir("odd_victim");
  fs::create_directories(outside);
  const fs::path victim = outside / "victim.txt";
  write_bytes(victim, "precious\n");
  const std::map<std::string, std::string> first = book_checkpoint(a, 3);
  const auto victim_intact = [&] {
    CHECK(fs::is_regular_file(fs::symlink_status(victim)));
    CHECK(file_bytes(victim) == "precious\n");
  };

  // In the CLI: every temporary name taken at once (links to the victim, FIFOs, devices); --resume then
  // --out the same folder writes the whole set.
  for (Odd kind : kOdd) {
    CAPTURE(odd_kind(kind));
    fs::remove_all(dir);
    fs::copy(a, dir);
    bool made = true;
    for (const std::string& name : temporary_names()) made = make_odd(dir / name, kind, victim) && made;
    if (!made) {
      MESSAGE("no FIFO or device nodes here (mknod is not allowed, or WebAssembly): the case is skipped");
      continue;
    }
    const test::Run r = test::cli(resume_from(dir.string(), {"--out", dir.string(), "--stop-after", "6"}));
    CAPTURE(r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("(Step 000005)") != std::string::npos);
    victim_intact();
    check_only_set_files(dir);
    CHECK(folder_files(dir).size() == first.size());
    CHECK(resumed_step(dir) == 5);
  }
  // the induction task into a new folder whose probe's name is a link (the probe is all it has)
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(victim, dir / ".attnviz-write-probe.tmp");
  {
    const test::Run r = test::cli({"train", "--task", "induction", "--steps", "3", "--out", dir.string()});
    CAPTURE(r.err);
    CHECK(r.status == 0);
    victim_intact();
    check_only_set_files(dir);
    CHECK(check_checkpoint_folder(dir.string()).is_ok());
  }

  // In the engine: each name alone, each kind.
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  std::optional<RunState> run;
  REQUIRE(read_checkpoint(a.string(), m, opt, has_optimizer, run).is_ok());
  opt.steps += 1;  // another save: its optimizer file differs
  for (Odd kind : kOdd)
    for (const std::string& name : temporary_names()) {
      CAPTURE(odd_kind(kind));
      CAPTURE(name);
      fs::remove_all(dir);
      fs::copy(a, dir);
      if (!make_odd(dir / name, kind, victim)) continue;  // (no device nodes here)
      const Status st = name == ".attnviz-write-probe.tmp"
                            ? check_checkpoint_out(dir.string(), kVocab)
                            : write_checkpoint(dir.string(), m, opt, kVocab, &*run);
      CAPTURE(st.error);
      CHECK(st.is_ok());
      victim_intact();
      check_only_set_files(dir);
      CHECK(folder_files(dir).size() == first.size());
      if (name != ".attnviz-write-probe.tmp")
        CHECK(folder_files(dir).at("optimizer.safetensors") != first.at("optimizer.safetensors"));
      CHECK(resumed_step(dir) == 2);
    }

  // A set's own name that is a link, FIFO or device (a folder given one since): a new run's --out replaces
  // the entry itself by the rename, never writing through it.
  for (Odd kind : kOdd) {
    CAPTURE(odd_kind(kind));
    fs::remove_all(dir);
    fs::copy(a, dir);
    bool made = true;
    for (const char* name : kSet) made = make_odd(dir / name, kind, victim) && made;
    if (!made) continue;  // (no device nodes here)
    const test::Run r = test::cli(reduced({"--epochs", "1", "--stop-after", "2", "--out", dir.string()}));
    CAPTURE(r.err);
    CHECK(r.status == 0);
    victim_intact();
    check_only_set_files(dir);
    CHECK(folder_files(dir).size() == first.size());
    CHECK(resumed_step(dir) == 1);
  }
  // a folder at a temporary name stays refused by name, before anything is written
  fs::remove_all(dir);
  fs::copy(a, dir);
  fs::create_directory(dir / "model.safetensors.tmp");
  const Status folder = write_checkpoint(dir.string(), m, opt, kVocab, &*run);
  CHECK(folder.error.find("holds a folder named model.safetensors.tmp") != std::string::npos);
  for (const fs::path& p : {a, dir, outside}) fs::remove_all(p);
}

TEST_CASE(
    "train cli: checkpoint: a set file that is a link, FIFO or device is refused by name, never followed or "
    "waited on") {
  const fs::path a = temp_dir("odd_read_a"), b = temp_dir("odd_read_b"), dir = temp_dir("odd_read"),
                 outside = temp_dir("odd_read_outside");
  fs::create_directories(outside);
  const std::map<std::string, std::string> first = book_checkpoint(a, 3), second = book_checkpoint(b, 5);

  // Each file of the set in turn: a link to a copy of its own bytes elsewhere (whose hash matches), a FIFO,
  // a device. --resume and --model refuse it by name.
  for (Odd kind : kOdd)
    for (const char* name : kSet) {
      CAPTURE(odd_kind(kind));
      CAPTURE(name);
      fs::remove_all(dir);
      fs::copy(a, dir);
      const fs::path copy = outside / name;
      write_bytes(copy, first.at(name));
      if (!make_odd(dir / name, kind, copy)) continue;  // (no device nodes here)
      const std::string torn = quote(dir.string()) + " is a torn checkpoint: its " + name + " is " +
                               odd_kind(kind) + ", not a regular file";
      check_refused(resume_from(dir.string(), {}), torn);
      check_refused_cli({"--model", dir.string(), "--text", "Every effort"}, torn);
      CHECK(file_bytes(copy) == first.at(name));
    }

  // A write cut short after its commit, whose NAME.tmp is a link to the new bytes (or a FIFO, a device): it
  // is never renamed into place. Where NAME already holds the new set's bytes the set is finished without
  // it; else the commit cannot be finished, and says which file.
  std::vector<std::string> names;
  for (const auto& entry : second)
    if (entry.first != "checkpoint.json") names.push_back(entry.first);
  for (Odd kind : kOdd)
    for (const std::string& name : names) {
      CAPTURE(odd_kind(kind));
      CAPTURE(name);
      fs::remove_all(dir);
      fs::copy(a, dir);
      for (const std::string& other : names) write_bytes(dir / (other + ".tmp"), second.at(other));
      const fs::path copy = outside / (name + ".new");
      write_bytes(copy, second.at(name));
      if (!make_odd(dir / (name + ".tmp"), kind, copy)) continue;  // (no device nodes here)
      write_bytes(dir / "checkpoint.pending.json", second.at("checkpoint.json"));
      if (first.at(name) == second.at(name)) {
        CHECK(resumed_step(dir) == 4);
        CHECK(file_bytes(dir / name) == second.at(name));
      } else {
        check_refused(resume_from(dir.string(), {}), "cannot be finished: its " + name +
                                                         " holds other bytes than its " +
                                                         "checkpoint.pending.json lists");
        CHECK(fs::symlink_status(dir / (name + ".tmp")).type() != fs::file_type::regular);
      }
      CHECK(fs::is_regular_file(fs::symlink_status(dir / name)));
      CHECK(file_bytes(copy) == second.at(name));
    }

  // The manifests themselves: a link (to a copy of the right one), a FIFO, a device is no manifest.
  for (Odd kind : kOdd)
    for (const char* manifest : {"checkpoint.json", "checkpoint.pending.json"}) {
      CAPTURE(odd_kind(kind));
      CAPTURE(manifest);
      fs::remove_all(dir);
      fs::copy(a, dir);
      const fs::path copy = outside / "manifest.json";
      write_bytes(copy, first.at("checkpoint.json"));
      if (!make_odd(dir / manifest, kind, copy)) continue;  // (no device nodes here)
      check_refused(resume_from(dir.string(), {}),
                    "cannot read " + quote((dir / manifest).string()) + ": is " + odd_kind(kind));
      CHECK(file_bytes(copy) == first.at("checkpoint.json"));
    }
  for (const fs::path& p : {a, b, dir, outside}) fs::remove_all(p);
}
