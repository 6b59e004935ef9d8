// attnviz-cli --model: flags a model does not use are refused by name, --tokenize uses the model's tokenizer,
// generation is bounded and stops on request, every path it prints stays one line, --download fetches only
// what --model reads as a hub name, and its help names everything it opens.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "attnviz/io/decoder.hpp"
#include "cli_run.hpp"
#include "model_cli.hpp"
#include "safetensors_writer.hpp"

using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using nlohmann::json;

namespace {

const std::string kGpt = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";
const std::string kFolder =
    kGpt + "/hf-folder";  // 2 layers, 4 heads (config.json), context 64, own vocabulary
const std::string kNoConfig = kGpt + "/11_file_hf_d64_h4_l2_p10_bias_f16.safetensors";  // d_model 64

std::vector<int> ids_of(const json& tokens) {
  std::vector<int> ids;
  for (const json& t : tokens) ids.push_back(t.at("id"));
  return ids;
}

}  // namespace

TEST_CASE("attnviz-cli --model --heads: a preset's count is its own, a file's is checked") {
  for (const char* heads : {"0", "3", "-5", "12"})
    check_refused({"--model", "gpt2-small", "--heads", heads},
                  "--heads does not apply to --model: a model's head count comes from its preset or file");
  check_refused({"--model", kFolder, "--heads", "0"}, "--heads must be 1 or more (got 0)");
  check_refused({"--model", kFolder, "--heads", "-5"}, "--heads must be 1 or more (got -5)");
  // A config.json that gives another count: no silent override.
  check_refused({"--model", kFolder, "--heads", "2"},
                "the heads option (--heads) gives 2 heads but '" + kFolder + "/config.json' gives 4");
  // Without a config.json the option gives the count, and must split d_model.
  check_refused({"--model", kNoConfig, "--vocab", kGpt + "/vocab", "--heads", "3"},
                "d_model 64 does not split into 3 heads (from the heads option, --heads)");
  const Run r = cli({"--model", kNoConfig, "--vocab", kGpt + "/vocab", "--heads", "2", "--text", "a"});
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("2 layers, 2 heads of dim 32") != std::string::npos);
  CHECK(cli({"--model", kFolder, "--heads", "4", "--text", "a"}).status == 0);  // agrees with config.json
}

TEST_CASE("attnviz-cli --tokenize --model: the model's own tokenizer, without its weights") {
  const Run model = cli({"--model", kFolder, "--text", "the cat sat", "--json", "--layers", "none"});
  REQUIRE(model.status == 0);
  const std::vector<int> want = ids_of(json::parse(model.out).at("tokens"));
  const Run r = cli({"--tokenize", "--model", kFolder, "--text", "the cat sat"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out).get<std::vector<int>>() == want);
  // GPT-2's vocabulary (not the folder's 512 tokens) gives other ids for the same text.
  const Run gpt2 = cli({"--tokenize", "--vocab", ATTNVIZ_GPT2_DIR, "--text", "the cat sat"});
  REQUIRE(gpt2.status == 0);
  CHECK(gpt2.out != r.out);
  // A seeded size uses GPT-2's vocabulary, as --model does; --vocab still wins.
  CHECK(cli({"--tokenize", "--model", "gpt2-small", "--vocab", ATTNVIZ_GPT2_DIR, "--text", "the cat sat"})
            .out == gpt2.out);
  check_refused({"--tokenize", "--model", "/nonexistent/m", "--text", "a"},
                "cannot read '/nonexistent/m': no such file or folder");
  check_refused({"--tokenize", "--model", kFolder, "--generate", "3"},
                "--generate does not apply to --tokenize");
}

TEST_CASE("attnviz-cli --generate: at most 4 context lengths, counted before anything runs") {
  // The folder's context is 64: 4 x 64 = 256 tokens in all, "a" is one of them.
  check_refused({"--model", kFolder, "--text", "a", "--generate", "300"},
                "--generate 300 would make the text 301 tokens long, more than 4 x the context length 64: "
                "past 64 tokens each new one reruns the model over the last 64, 237 full passes here; "
                "generate at most 255");
  CHECK(cli({"--model", kFolder, "--text", "a", "--generate", "255", "--eval", "--top-k", "0"}).status == 0);
  // gpt2-small's 100000 tokens (about 40 hours) are refused before its 163 M parameters are drawn.
  check_refused(
      {"--model", "gpt2-small", "--generate", "100000"},
      "more than 4 x the context length 1024: past 1024 tokens each new one reruns the model over the "
      "last 1024, 98977 full passes here; generate at most 4095");
  CHECK(attnviz::check_generation(6, 4090, 1024).is_ok());
  CHECK_FALSE(attnviz::check_generation(6, 4091, 1024).is_ok());
}

TEST_CASE("attnviz-cli --generate: a stop request ends it with the tokens so far, exit status 130") {
  const std::vector<std::string> args = {"--model", kFolder,    "--text", "the cat",    "--eval",
                                         "--json",  "--layers", "none",   "--generate", "20"};
  const Run whole = cli(args);
  REQUIRE(whole.status == 0);
  const json all = json::parse(whole.out);
  REQUIRE(all.at("generated").size() == 20);

  std::atomic<bool> stop{true}, generating{false};  // Ctrl-C already pressed: the first token is the last
  attnviz::GenerateControl control;
  control.stop = &stop;
  control.generating = &generating;
  std::ostringstream out, err;
  const int status = attnviz::run_cli(args, out, err, control);
  CHECK(status == attnviz::kStoppedStatus);
  CHECK(err.str() == "attnviz-cli: stopped by Ctrl-C after 1 of 20 tokens: the output holds those\n");
  CHECK_FALSE(generating.load());            // Ctrl-C ends the program again once generation is over
  const json part = json::parse(out.str());  // the output is whole: valid JSON of the shorter text
  REQUIRE(part.at("generated").size() == 1);
  CHECK(part.at("generated")[0] == all.at("generated")[0]);
  const std::vector<int> ids = ids_of(part.at("tokens")), all_ids = ids_of(all.at("tokens"));
  REQUIRE(ids.size() + 19 == all_ids.size());
  CHECK(std::equal(ids.begin(), ids.end(), all_ids.begin()));

  // On a terminal: a progress line rewritten in place, cleared at the end (stderr keeps only messages).
  stop = false;
  control.progress = true;
  std::ostringstream out1, err1;
  CHECK(attnviz::run_cli(args, out1, err1, control) == 0);
  const std::string e = err1.str();
  CHECK(e.rfind("\rattnviz-cli: generated 1 of 20 tokens in ", 0) == 0);
  CHECK(e.find("\rattnviz-cli: generated 20 of 20 tokens in ") != std::string::npos);
  CHECK(e.find("s left (Ctrl-C stops)\033[K") != std::string::npos);
  CHECK(e.size() >= 4);
  CHECK(e.substr(e.size() - 4) == "\r\033[K");
  CHECK(e.find('\n') == std::string::npos);
  control.progress = false;

  // Not pressed: the whole run, and no progress line on a stderr that is not a terminal.
  stop = false;
  std::ostringstream out2, err2;
  CHECK(attnviz::run_cli(args, out2, err2, control) == 0);
  const json again = json::parse(out2.str());
  CHECK(again.at("generated") == all.at("generated"));
  CHECK(again.at("logits") == all.at("logits"));
  CHECK(err2.str().empty());
}

TEST_CASE("attnviz-cli --model: a path with a newline and an escape sequence stays one line") {
  const std::string odd = "/nonexistent/a\nb\x1b[2J/model.safetensors";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--model", odd, "--text", "a"},
        std::vector<std::string>{"--model", kFolder, "--vocab", "/nonexistent/v\n\x1b[31m", "--text", "a"},
        std::vector<std::string>{"--tokenize", "--model", odd, "--text", "a"}}) {
    const Run r = cli(args);
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find('\x1b') == std::string::npos);
    CHECK(r.err.find("\\x0A") != std::string::npos);
    CHECK(r.err.find("\\x1B") != std::string::npos);
  }
  // The header's source is the folder's name: a copy of the model in a folder named with both.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_odd\n\x1b[31m";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt"})
    std::filesystem::copy_file(kFolder + "/" + f, dir / f);
  const Run r = cli({"--model", dir.string(), "--text", "a"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.rfind("attnviz attnviz_odd\\x0A\\x1B[31m/model.safetensors: 2 layers, 4 heads", 0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "attnviz-cli --model --download: what --model opens as a path is never fetched, a bad name never asked") {
  attnviz::test::TempDir tmp("model_ref_download");
  std::filesystem::create_directories(tmp.path / "tiny");
  std::filesystem::copy(kFolder, tmp.path / "tiny" / "gpt2", std::filesystem::copy_options::recursive);
  const attnviz::test::InDirectory here(tmp.path);
  // tiny/gpt2 reads as a hub name, but it is a folder here: --model opens it, --download refuses it.
  const Run opened = cli({"--model", "tiny/gpt2", "--text", "a", "--layers", "none"});
  CAPTURE(opened.err);
  CHECK(opened.status == 0);
#if defined(__EMSCRIPTEN__)  // the WebAssembly CLI downloads nothing: every download is refused as such
  check_refused({"--model", "tiny/gpt2", "--download", "--text", "a"},
                "downloads from the Hugging Face hub need the native attnviz-cli or app");
#else
  const std::string local = "not 'tiny/gpt2', a path here (it exists): --model opens it without --download";
  check_refused({"--model", "tiny/gpt2", "--download", "--text", "a"}, local);
  check_refused({"download", "tiny/gpt2"}, local);
  // Paths and presets are not hub names; a malformed name is refused before any request.
  check_refused({"--model", "./absent/x", "--download"},
                "--download takes a Hugging Face model name (ORG/NAME or ORG/NAME@REV), not './absent/x'");
  check_refused({"--model", "gpt2-small", "--download"}, "not 'gpt2-small'");
  check_refused({"--model", "tiny/gpt2@", "--download"}, "the revision after '@' is empty");
  check_refused({"download", "_tiny/gpt2"}, "its organization must start with a letter or a digit");
#endif
  check_refused({"--tokenize", "--model", "tiny/x@a//b", "--text", "a"}, "\"//\"");
}

TEST_CASE(
    "attnviz-cli --help: --model names the presets, every architecture the loader opens and hub names") {
  const Run r = cli({"--help"});
  REQUIRE(r.status == 0);
  const std::size_t at = r.out.find("\n  --model ");
  REQUIRE(at != std::string::npos);
  const std::string help = r.out.substr(at, r.out.find("\n  --", at + 1) - at);
  CAPTURE(help);
  for (const attnviz::GptPreset& p : attnviz::gpt_presets()) CHECK(help.find(p.name) != std::string::npos);
  CHECK(help.find("gpt2 (GPT-2)") != std::string::npos);
  for (const std::string& a : attnviz::decoder_architectures()) CHECK(help.find(a) != std::string::npos);
  for (const char* s :
       {"drawn from --seed", "folder", ".safetensors", "ORG/NAME[@REV]", "$HF_HUB_CACHE", "--download"})
    CHECK(help.find(s) != std::string::npos);
}
