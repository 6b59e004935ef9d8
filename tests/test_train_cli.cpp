// attnviz-cli train end to end (in-process): the book's lines for the reduced run of the PyTorch fixture,
// JSON lines, a checkpoint that --model opens and --resume continues from, and every bad input refused in one
// line.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/head_kinds.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "check.hpp"
#include "cli_run.hpp"

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

// A tiny run on the story with shuffling and dropout on (both flavours' masks, the schedule and clipping).
std::vector<std::string> tiny(const std::string& flavour, std::vector<std::string> more) {
  std::vector<std::string> a = {"train",         kStory,  "--vocab",        kVocab, "--epochs",     "2",
                                "--eval-freq",   "4",     "--eval-iter",    "2",    "--new-tokens", "6",
                                "--dropout-rng", flavour, "--warmup-steps", "10",   "--max-norm",   "1",
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
  check_refused({"train", "--task", "induction", "--stop-after", "3"},
                "--stop-after does not apply to --task induction");
}
