// Reading Hugging Face's tokenizer.json (untrusted): one streaming pass that keeps model.vocab and
// model.merges in compact lists (a file may hold 500,000 merges) and everything else as a small JSON tree,
// with caps on depth, counts and sizes; then each part is validated into the description in
// tokenizer_json.hpp.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "attnviz/engine.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/text.hpp"
#include "io/tokenizer_json.hpp"

namespace attnviz::hf {
namespace {

using nlohmann::json;

// The SAX handler: a DOM for everything but model.vocab ({token: id}) and model.merges ("a b" or ["a", "b"]).
struct Reader {
  enum Mode { Dom, Vocab, Merges, Pair };
  struct Frame {
    Mode mode;
    json* node;
  };
  json root;
  json* model = nullptr;
  std::vector<Frame> frames;
  std::string current_key, error;
  std::size_t values = 0;
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, std::int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> pair;

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }
  Mode mode() const { return frames.empty() ? Dom : frames.back().mode; }
  bool wrong_in_special() {
    switch (mode()) {
      case Vocab:
        return fail("model.vocab: the id of " + quote(current_key) + " is not an integer");
      case Merges:
        return fail("model.merges entry " + std::to_string(merges.size() + 1) +
                    ": expected \"left right\" or [\"left\", \"right\"]");
      case Pair:
        return fail("model.merges entry " + std::to_string(merges.size() + 1) +
                    ": expected [\"left\", \"right\"], two strings");
      case Dom:
        break;
    }
    return true;
  }
  json* add(json v) {
    if (++values > kMaxOtherValues) {
      fail("more than " + std::to_string(kMaxOtherValues) +
           " JSON values outside model.vocab and model.merges");
      return nullptr;
    }
    if (frames.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *frames.back().node;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[current_key];
    slot = std::move(v);
    return &slot;
  }
  bool scalar(json v) {
    if (mode() != Dom) return wrong_in_special();
    return add(std::move(v)) != nullptr;
  }
  bool id(std::int64_t v) {
    if (mode() == Vocab) {
      if (vocab.size() >= static_cast<std::size_t>(kMaxTokenId))
        return fail("model.vocab has more than " + std::to_string(kMaxTokenId) + " tokens");
      vocab.emplace_back(std::move(current_key), v);
      return true;
    }
    return scalar(json(v));
  }
  bool open(bool object) {
    if (static_cast<int>(frames.size()) >= kMaxJsonDepth)
      return fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (mode() == Merges && !object) {
      pair.clear();
      frames.push_back({Pair, nullptr});
      return true;
    }
    if (mode() != Dom) return wrong_in_special();
    const bool in_model = !frames.empty() && frames.back().node == model && model;
    if (in_model && object && current_key == "vocab") {
      has_vocab = true;
      frames.push_back({Vocab, nullptr});
      return true;
    }
    if (in_model && !object && current_key == "merges") {
      has_merges = true;
      frames.push_back({Merges, nullptr});
      return true;
    }
    const bool is_model = frames.size() == 1 && object && current_key == "model";
    json* node = add(object ? json::object() : json::array());
    if (!node) return false;
    if (is_model) model = node;
    frames.push_back({Dom, node});
    return true;
  }
  bool close() {
    if (mode() == Pair) {
      if (pair.size() != 2)
        return fail("model.merges entry " + std::to_string(merges.size() + 1) +
                    ": expected [\"left\", \"right\"], two strings");
      if (merges.size() >= kMaxMerges)
        return fail("model.merges has more than " + std::to_string(kMaxMerges) + " merges");
      merges.emplace_back(std::move(pair[0]), std::move(pair[1]));
    }
    frames.pop_back();
    return true;
  }

  // nlohmann's SAX interface.
  bool null() { return scalar(json()); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return id(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    return id(v > static_cast<json::number_unsigned_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(v));
  }
  bool number_float(json::number_float_t v, const std::string&) { return scalar(json(v)); }
  bool string(std::string& v) {
    if (mode() == Merges) {
      const std::size_t space = v.find(' ');
      if (space == std::string::npos)
        return fail("model.merges entry " + std::to_string(merges.size() + 1) + ": " + quote(v) +
                    " is not two tokens separated by a space");
      if (merges.size() >= kMaxMerges)
        return fail("model.merges has more than " + std::to_string(kMaxMerges) + " merges");
      merges.emplace_back(v.substr(0, space), v.substr(space + 1));
      return true;
    }
    if (mode() == Pair) {
      if (pair.size() >= 2) return wrong_in_special();
      pair.push_back(std::move(v));
      return true;
    }
    return scalar(json(std::move(v)));
  }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return open(true); }
  bool key(std::string& k) {
    current_key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    return fail("not valid JSON (at byte " + std::to_string(position) + ")");
  }
};

// Typed access to the tree, each miss a message naming the place.
struct Obj {
  const json& j;
  std::string where;

  const json* get(const char* k) const {
    const auto it = j.find(k);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  Status string(const char* k, std::string& out, bool required = true) const {
    const json* v = get(k);
    if (!v) return required ? Status::fail(where + ": \"" + k + "\" is missing") : Status::ok();
    if (!v->is_string()) return Status::fail(where + "." + k + " is not a string");
    out = v->get<std::string>();
    return Status::ok();
  }
  Status boolean(const char* k, bool& out) const {
    const json* v = get(k);
    if (!v) return Status::ok();
    if (!v->is_boolean()) return Status::fail(where + "." + k + " is not true or false");
    out = v->get<bool>();
    return Status::ok();
  }
  Status integer(const char* k, int& out, int lo, int hi) const {
    const json* v = get(k);
    if (!v) return Status::ok();
    if (!v->is_number_integer() || v->get<std::int64_t>() < lo || v->get<std::int64_t>() > hi)
      return Status::fail(where + "." + k + " is not an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    out = static_cast<int>(v->get<std::int64_t>());
    return Status::ok();
  }
  Status type(std::string& out) const {
    if (!j.is_object()) return Status::fail(where + " is not a JSON object");
    return string("type", out);
  }
};

Status read_pattern(const Obj& o, const std::string& where, Pattern& p) {
  const json* v = o.get("pattern");
  if (!v || !v->is_object() || v->size() != 1 || !(v->contains("String") || v->contains("Regex")) ||
      !v->begin()->is_string())
    return Status::fail(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  const std::string text = v->begin()->get<std::string>();
  if (v->contains("Regex")) return compile_regex(text, where + ".pattern", p);
  p.literal = text;
  p.re.reset();
  p.first_bytes = nullptr;
  p.where = where + ".pattern";
  return Status::ok();
}

// GPT-2's pre-tokenizer regex (ByteLevel's use_regex).
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Status read_normalizer(const json& j, const std::string& where, int depth, std::vector<Normalizer>& out) {
  const Obj o{j, where};
  std::string type;
  if (Status st = o.type(type); !st.is_ok()) return st;
  if (depth > 8 || out.size() >= kMaxSteps) return Status::fail(where + ": too many normalizers");
  Normalizer n;
  if (type == "Sequence") {
    const json* list = o.get("normalizers");
    if (!list || !list->is_array()) return Status::fail(where + ".normalizers is not a list");
    for (std::size_t i = 0; i < list->size(); ++i)
      if (Status st =
              read_normalizer((*list)[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1, out);
          !st.is_ok())
        return st;
    return Status::ok();
  }
  if (type == "NFC")
    n.kind = NormKind::NFC;
  else if (type == "NFD")
    n.kind = NormKind::NFD;
  else if (type == "NFKC")
    n.kind = NormKind::NFKC;
  else if (type == "NFKD")
    n.kind = NormKind::NFKD;
  else if (type == "Prepend") {
    n.kind = NormKind::Prepend;
    if (Status st = o.string("prepend", n.content); !st.is_ok()) return st;
  } else if (type == "Replace") {
    n.kind = NormKind::Replace;
    if (Status st = read_pattern(o, where, n.pattern); !st.is_ok()) return st;
    if (Status st = o.string("content", n.content); !st.is_ok()) return st;
  } else {
    return Status::fail(where + ": the normalizer " + quote(type) +
                        " is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence are)");
  }
  n.where = where + " (" + type + ")";
  out.push_back(std::move(n));
  return Status::ok();
}

Status read_behavior(const Obj& o, Behavior& b) {
  std::string s;
  if (Status st = o.string("behavior", s); !st.is_ok()) return st;
  if (s == "Removed")
    b = Behavior::Removed;
  else if (s == "Isolated")
    b = Behavior::Isolated;
  else if (s == "MergedWithPrevious")
    b = Behavior::MergedWithPrevious;
  else if (s == "MergedWithNext")
    b = Behavior::MergedWithNext;
  else if (s == "Contiguous")
    b = Behavior::Contiguous;
  else
    return Status::fail(o.where + ".behavior " + quote(s) +
                        " is not one of Removed, Isolated, "
                        "MergedWithPrevious, MergedWithNext, Contiguous");
  return Status::ok();
}

Status read_replacement(const Obj& o, std::string& out) {
  if (Status st = o.string("replacement", out); !st.is_ok()) return st;
  char32_t cp = 0;
  if (out.empty() || decode_utf8(out, 0, cp) != out.size())
    return Status::fail(o.where + ".replacement is not one character");
  return Status::ok();
}

Status read_pre_tokenizer(const json& j, const std::string& where, int depth,
                          std::vector<PreTokenizer>& out) {
  const Obj o{j, where};
  std::string type;
  if (Status st = o.type(type); !st.is_ok()) return st;
  if (depth > 8 || out.size() >= kMaxSteps) return Status::fail(where + ": too many pre-tokenizers");
  if (!out.empty() && out.back().kind == PreKind::ByteLevel)
    return Status::fail(where +
                        ": a pre-tokenizer after ByteLevel is not supported (ByteLevel must be last)");
  PreTokenizer p;
  if (type == "Sequence") {
    const json* list = o.get("pretokenizers");
    if (!list || !list->is_array()) return Status::fail(where + ".pretokenizers is not a list");
    for (std::size_t i = 0; i < list->size(); ++i)
      if (Status st = read_pre_tokenizer((*list)[i], where + ".pretokenizers[" + std::to_string(i) + "]",
                                         depth + 1, out);
          !st.is_ok())
        return st;
    return Status::ok();
  }
  if (type == "Split") {
    if (Status st = read_pattern(o, where, p.pattern); !st.is_ok()) return st;
    if (Status st = read_behavior(o, p.behavior); !st.is_ok()) return st;
    if (Status st = o.boolean("invert", p.invert); !st.is_ok()) return st;
  } else if (type == "ByteLevel") {
    p.kind = PreKind::ByteLevel;
    bool use_regex = true;
    if (Status st = o.boolean("add_prefix_space", p.add_prefix_space); !st.is_ok()) return st;
    if (Status st = o.boolean("use_regex", use_regex); !st.is_ok()) return st;
    if (use_regex)
      if (Status st = compile_regex(kByteLevelRegex, where, p.pattern); !st.is_ok()) return st;
  } else if (type == "Metaspace") {
    p.kind = PreKind::Metaspace;
    if (Status st = read_replacement(o, p.replacement); !st.is_ok()) return st;
    if (Status st = o.boolean("split", p.split); !st.is_ok()) return st;
    std::string scheme = "always";
    bool add_prefix_space = true;  // files older than prepend_scheme say add_prefix_space
    if (Status st = o.boolean("add_prefix_space", add_prefix_space); !st.is_ok()) return st;
    if (!add_prefix_space) scheme = "never";
    if (Status st = o.string("prepend_scheme", scheme, false); !st.is_ok()) return st;
    if (scheme == "always")
      p.scheme = PrependScheme::Always;
    else if (scheme == "first")
      p.scheme = PrependScheme::First;
    else if (scheme == "never")
      p.scheme = PrependScheme::Never;
    else
      return Status::fail(where + ".prepend_scheme " + quote(scheme) + " is not always, first or never");
  } else if (type == "Digits") {
    bool individual = false;
    if (Status st = o.boolean("individual_digits", individual); !st.is_ok()) return st;
    if (Status st = compile_regex("\\p{N}", where, p.pattern); !st.is_ok()) return st;
    p.behavior = individual ? Behavior::Isolated : Behavior::Contiguous;
  } else {
    return Status::fail(where + ": the pre-tokenizer " + quote(type) +
                        " is not supported (Split, ByteLevel, Metaspace, Digits, Sequence are)");
  }
  out.push_back(std::move(p));
  return Status::ok();
}

Status read_decoder(const json& j, const std::string& where, int depth, std::vector<Decoder>& out) {
  const Obj o{j, where};
  std::string type;
  if (Status st = o.type(type); !st.is_ok()) return st;
  if (depth > 8 || out.size() >= kMaxSteps) return Status::fail(where + ": too many decoders");
  Decoder d;
  if (type == "Sequence") {
    const json* list = o.get("decoders");
    if (!list || !list->is_array()) return Status::fail(where + ".decoders is not a list");
    for (std::size_t i = 0; i < list->size(); ++i)
      if (Status st =
              read_decoder((*list)[i], where + ".decoders[" + std::to_string(i) + "]", depth + 1, out);
          !st.is_ok())
        return st;
    return Status::ok();
  }
  if (type == "ByteLevel")
    d.kind = DecKind::ByteLevel;
  else if (type == "ByteFallback")
    d.kind = DecKind::ByteFallback;
  else if (type == "Fuse")
    d.kind = DecKind::Fuse;
  else if (type == "Strip") {
    d.kind = DecKind::Strip;
    if (Status st = o.string("content", d.content); !st.is_ok()) return st;
    char32_t cp = 0;
    if (d.content.empty() || decode_utf8(d.content, 0, cp) != d.content.size())
      return Status::fail(where + ".content is not one character");
    if (Status st = o.integer("start", d.start, 0, 1 << 20); !st.is_ok()) return st;
    if (Status st = o.integer("stop", d.stop, 0, 1 << 20); !st.is_ok()) return st;
  } else if (type == "Replace") {
    d.kind = DecKind::Replace;
    if (Status st = read_pattern(o, where, d.pattern); !st.is_ok()) return st;
    // Decoding runs on every token's label and every decoded text, with no way to fail: its work and its
    // growth are bounded when the file is read, so a Replace decoder's pattern is a literal (every real
    // file's is: "▁"), its replacement a character's worth, and all of them together grow a text at most
    // kMaxDecoderGrowth times (a pattern of n bytes replaced by c grows a text at most c / n times).
    if (d.pattern.re)
      return Status::fail(where + ".pattern: a Replace decoder's regex is not supported (a String is)");
    if (Status st = o.string("content", d.content); !st.is_ok()) return st;
    if (d.content.size() > kMaxDecoderContent)
      return Status::fail(where + ".content is longer than " + std::to_string(kMaxDecoderContent) + " bytes");
  } else if (type == "Metaspace") {
    d.kind = DecKind::Metaspace;
    if (Status st = read_replacement(o, d.content); !st.is_ok()) return st;
    std::string scheme = "always";
    bool add_prefix_space = true;
    if (Status st = o.boolean("add_prefix_space", add_prefix_space); !st.is_ok()) return st;
    if (!add_prefix_space) scheme = "never";
    if (Status st = o.string("prepend_scheme", scheme, false); !st.is_ok()) return st;
    d.strip_first = scheme != "never";
  } else {
    return Status::fail(
        where + ": the decoder " + quote(type) +
        " is not supported (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence are)");
  }
  out.push_back(std::move(d));
  return Status::ok();
}

// A template's special token by name -> its ids.
Status special_ids(const Obj& o, const std::string& name, std::vector<int>& ids) {
  const json* specials = o.get("special_tokens");
  const std::string missing = o.where + ": the special token " + quote(name) + " is not in special_tokens";
  if (!specials || !specials->is_object() || !specials->contains(name)) return Status::fail(missing);
  const json& s = (*specials)[name];
  if (!s.is_object() || !s.contains("ids") || !s["ids"].is_array())
    return Status::fail(o.where + ".special_tokens." + quote(name, kQuoteCap, '\0') + ".ids is not a list");
  for (const json& v : s["ids"]) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= kMaxTokenId)
      return Status::fail(o.where + ": a special token id of " + quote(name) + " is out of range");
    ids.push_back(static_cast<int>(v.get<std::int64_t>()));
  }
  return Status::ok();
}

Status read_post_processor(const json& j, const std::string& where, int depth, std::vector<int>& prefix,
                           std::vector<int>& suffix) {
  const Obj o{j, where};
  std::string type;
  if (Status st = o.type(type); !st.is_ok()) return st;
  if (depth > 8) return Status::fail(where + ": too many post-processors");
  if (type == "ByteLevel") return Status::ok();  // offsets only
  if (type == "Sequence") {
    const json* list = o.get("processors");
    if (!list || !list->is_array()) return Status::fail(where + ".processors is not a list");
    for (std::size_t i = 0; i < list->size(); ++i)
      if (Status st = read_post_processor((*list)[i], where + ".processors[" + std::to_string(i) + "]",
                                          depth + 1, prefix, suffix);
          !st.is_ok())
        return st;
    return Status::ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    std::vector<int> ids[2];
    const char* names[2] = {"cls", "sep"};
    for (int k = 0; k < 2; ++k) {
      const json* v = o.get(names[k]);
      if (!v || !v->is_array() || v->size() != 2 || !(*v)[1].is_number_integer() ||
          (*v)[1].get<std::int64_t>() < 0 || (*v)[1].get<std::int64_t>() >= kMaxTokenId)
        return Status::fail(where + "." + names[k] + ": expected [\"token\", id]");
      ids[k].push_back(static_cast<int>((*v)[1].get<std::int64_t>()));
    }
    prefix.insert(prefix.begin(), ids[0].begin(), ids[0].end());
    suffix.insert(suffix.end(), ids[1].begin(), ids[1].end());
    return Status::ok();
  }
  if (type != "TemplateProcessing")
    return Status::fail(
        where + ": the post-processor " + quote(type) +
        " is not supported (TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, "
        "Sequence are)");
  const json* single = o.get("single");
  if (!single) return Status::fail(where + ".single is missing");
  // The template: [{"SpecialToken": {"id": name}}, {"Sequence": {"id": "A"}}, ...] or "<s> $A </s>".
  std::vector<std::string> names;
  std::vector<bool> is_sequence;
  if (single->is_string()) {
    const std::string s = single->get<std::string>();
    for (std::size_t pos = 0; pos < s.size();) {
      const std::size_t end = std::min(s.find(' ', pos), s.size());
      std::string item = s.substr(pos, end - pos);
      pos = end + 1;
      if (item.empty()) continue;
      if (const std::size_t colon = item.rfind(':'); colon != std::string::npos && colon > 0)
        item.resize(colon);
      const bool seq = item == "$" || item == "$A" || item == "$0";
      if (!seq && item[0] == '$') return Status::fail(where + ".single: " + quote(item) + " is not $A");
      names.push_back(item);
      is_sequence.push_back(seq);
    }
  } else if (single->is_array()) {
    for (const json& piece : *single) {
      if (!piece.is_object() || piece.size() != 1 || !piece.begin()->is_object() ||
          !piece.begin()->contains("id") || !(*piece.begin())["id"].is_string())
        return Status::fail(where +
                            ".single: expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      const std::string kind = piece.begin().key(), name = (*piece.begin())["id"].get<std::string>();
      if (kind == "Sequence" && name != "A")
        return Status::fail(where + ".single: a single template reads A only");
      if (kind != "Sequence" && kind != "SpecialToken")
        return Status::fail(where + ".single: " + quote(kind) + " is not SpecialToken or Sequence");
      names.push_back(name);
      is_sequence.push_back(kind == "Sequence");
    }
  } else {
    return Status::fail(where + ".single is not a list");
  }
  if (std::count(is_sequence.begin(), is_sequence.end(), true) != 1)
    return Status::fail(where + ".single must hold the sequence exactly once");
  std::vector<int> before, after;
  bool seen = false;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (is_sequence[i]) {
      seen = true;
      continue;
    }
    if (Status st = special_ids(o, names[i], seen ? after : before); !st.is_ok()) return st;
  }
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
  return Status::ok();
}

std::string hex_token(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(b));
  return buf;
}

}  // namespace

Status read_tokenizer_json(std::string_view text, const std::string& name, Tokenizer& t) {
  if (text.size() > kMaxVocabFileBytes) {
    const BytesApart b = format_bytes_apart(text.size(), kMaxVocabFileBytes);
    return Status::fail(name + " is " + b.first + ", more than the " + b.second + " limit");
  }
  Reader r;
  const bool parsed = json::sax_parse(text.begin(), text.end(), &r, json::input_format_t::json, true);
  if (!parsed || !r.error.empty())
    return Status::fail(name + ": " + (r.error.empty() ? std::string("not valid JSON") : r.error));
  if (!r.root.is_object()) return Status::fail(name + ": expected a JSON object");
  if (!r.model) return Status::fail(name + ": \"model\" is missing or not an object");
  t.name = name;
  const Obj model{*r.model, "model"};
  std::string type;
  if (Status st = model.string("type", type); !st.is_ok()) return Status::fail(name + ": " + st.error);
  const auto fail = [&](const Status& st) { return Status::fail(name + ": " + st.error); };
  if (type != "BPE")
    return fail(Status::fail("the model type " + quote(type) + " is not supported (only BPE)"));
  if (model.get("dropout") &&
      !(model.get("dropout")->is_number() && model.get("dropout")->get<double>() == 0.0))
    return fail(Status::fail("model.dropout is not supported (it makes encoding random)"));
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string s;
    if (Status st = model.string(affix, s, false); !st.is_ok()) return fail(st);
    if (!s.empty()) return fail(Status::fail(std::string("model.") + affix + " is not supported"));
  }
  for (const auto& [flag, out] : {std::pair<const char*, bool*>{"ignore_merges", &t.ignore_merges},
                                  {"byte_fallback", &t.byte_fallback},
                                  {"fuse_unk", &t.fuse_unk}})
    if (Status st = model.boolean(flag, *out); !st.is_ok()) return fail(st);
  if (!r.has_vocab) return fail(Status::fail("model.vocab is missing"));
  if (!r.has_merges) return fail(Status::fail("model.merges is missing"));

  // The pipeline (byte-level when a ByteLevel pre-tokenizer is there).
  if (const json* n = r.root.contains("normalizer") ? &r.root["normalizer"] : nullptr; n && !n->is_null())
    if (Status st = read_normalizer(*n, "normalizer", 0, t.normalizers); !st.is_ok()) return fail(st);
  if (const json* p = r.root.contains("pre_tokenizer") ? &r.root["pre_tokenizer"] : nullptr;
      p && !p->is_null())
    if (Status st = read_pre_tokenizer(*p, "pre_tokenizer", 0, t.pre_tokenizers); !st.is_ok())
      return fail(st);
  if (const json* d = r.root.contains("decoder") ? &r.root["decoder"] : nullptr; d && !d->is_null())
    if (Status st = read_decoder(*d, "decoder", 0, t.decoders); !st.is_ok()) return fail(st);
  double growth = 1.0;  // what the Replace decoders can make of a text's length, together
  for (const Decoder& d : t.decoders)
    if (d.kind == DecKind::Replace && !d.pattern.literal.empty())
      growth *= std::max(
          1.0, static_cast<double>(d.content.size()) / static_cast<double>(d.pattern.literal.size()));
  if (growth > static_cast<double>(kMaxDecoderGrowth))
    return fail(Status::fail("decoder: its Replace steps could make a decoded text more than " +
                             std::to_string(kMaxDecoderGrowth) + " times as long as its tokens"));
  if (const json* p = r.root.contains("post_processor") ? &r.root["post_processor"] : nullptr;
      p && !p->is_null())
    if (Status st = read_post_processor(*p, "post_processor", 0, t.prefix, t.suffix); !st.is_ok())
      return fail(st);
  t.byte_level = std::any_of(t.pre_tokenizers.begin(), t.pre_tokenizers.end(),
                             [](const PreTokenizer& p) { return p.kind == PreKind::ByteLevel; });

  // The vocabulary: ids unique, in range; byte-level tokens read back into bytes where every character is in
  // GPT-2's alphabet (a token with any other character is kept for display but can never be produced).
  std::string raw;
  std::vector<const std::string*> written;  // id -> the token as written, for messages
  t.id_of.reserve(r.vocab.size());
  for (const auto& [token, id] : r.vocab) {
    if (id < 0 || id >= kMaxTokenId)
      return fail(Status::fail("model.vocab: the id " + std::to_string(id) + " of " + quote(token) +
                               " is outside [0, " + std::to_string(kMaxTokenId) + ")"));
    if (token.empty()) return fail(Status::fail("model.vocab: a token is empty"));
    if (token.size() > kMaxTokenBytes)
      return fail(
          Status::fail("model.vocab: a token is longer than " + std::to_string(kMaxTokenBytes) + " bytes"));
    if (check_utf8(token).is_ok() == false)
      return fail(Status::fail("model.vocab: a token is not valid UTF-8"));
    const auto index = static_cast<std::size_t>(id);
    if (index >= written.size()) written.resize(index + 1, nullptr), t.token.resize(index + 1);
    if (written[index])
      return fail(Status::fail("model.vocab: the id " + std::to_string(id) + " is given to both " +
                               quote(*written[index]) + " and " + quote(token)));
    written[index] = &token;
    const bool readable = !t.byte_level || from_byte_alphabet(token, raw);
    const std::string& key = t.byte_level && readable ? raw : token;
    t.token[index] = key;
    if (readable && !t.id_of.emplace(key, static_cast<int>(id)))
      return fail(Status::fail("model.vocab: the token " + quote(token) + " appears twice"));
  }
  std::fill(std::begin(t.byte_token), std::end(t.byte_token), -1);
  std::fill(std::begin(t.fallback_token), std::end(t.fallback_token), -1);
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    if (t.byte_level) t.byte_token[b] = t.id_of.find(std::string_view(&byte, 1));
    if (t.byte_fallback) t.fallback_token[b] = t.id_of.find(hex_token(b));
  }
  std::string unk;
  if (Status st = model.string("unk_token", unk, false); !st.is_ok()) return fail(st);
  if (!unk.empty()) {
    std::string key = unk;
    if (t.byte_level && from_byte_alphabet(unk, raw)) key = raw;
    t.unk = t.id_of.find(key);
    if (t.unk < 0) return fail(Status::fail("model.unk_token " + quote(unk) + " is not in model.vocab"));
  }

  // The merges: rank = order; both parts and their concatenation in the vocabulary.
  t.merges.reserve(r.merges.size());
  std::string left, right, both;
  for (std::size_t rank = 0; rank < r.merges.size(); ++rank) {
    const auto& [a, b] = r.merges[rank];
    const auto where = [rank] { return "model.merges entry " + std::to_string(rank + 1); };
    if (t.byte_level && !(from_byte_alphabet(a, left) && from_byte_alphabet(b, right))) {
      // a part outside the byte alphabet can never meet another on byte-level input: a merge that never fires
      continue;
    }
    if (!t.byte_level) left = a, right = b;
    const int l = t.id_of.find(left), rr = t.id_of.find(right);
    if (l < 0) return fail(Status::fail(where() + ": " + quote(a) + " is not in model.vocab"));
    if (rr < 0) return fail(Status::fail(where() + ": " + quote(b) + " is not in model.vocab"));
    both.assign(left).append(right);
    const int result = t.id_of.find(both);
    if (result < 0)
      return fail(Status::fail(where() + ": the result " + quote(a + b) + " is not in model.vocab"));
    // (a pair listed twice keeps its later rank, as tokenizers' HashMap does)
    const auto [rule, fresh] = t.merges.emplace(pair_key(l, rr), {static_cast<int>(rank), result});
    if (!fresh) *rule = MergeRule{static_cast<int>(rank), result};
  }

  // The added tokens: id and content each unique; normalized ones matched in normalized text.
  const json* added = r.root.contains("added_tokens") ? &r.root["added_tokens"] : nullptr;
  if (added && !added->is_null()) {
    if (!added->is_array()) return fail(Status::fail("added_tokens is not a list"));
    if (added->size() > kMaxAddedTokens)
      return fail(Status::fail("added_tokens has more than " + std::to_string(kMaxAddedTokens) + " tokens"));
    std::unordered_map<std::string, int> content_id;
    std::size_t normalized_bytes = 0;
    RegexBudget added_budget;  // every normalized added token's regex work together
    for (std::size_t i = 0; i < added->size(); ++i) {
      const Obj o{(*added)[i], "added_tokens[" + std::to_string(i) + "]"};
      if (!o.j.is_object()) return fail(Status::fail(o.where + " is not a JSON object"));
      AddedToken a{-1, {}, false, false, false, false, false};
      int id = -1;
      if (Status st = o.integer("id", id, 0, kMaxTokenId - 1); !st.is_ok()) return fail(st);
      if (id < 0) return fail(Status::fail(o.where + ": \"id\" is missing"));
      a.id = id;
      if (Status st = o.string("content", a.content); !st.is_ok()) return fail(st);
      if (a.content.empty()) continue;  // tokenizers ignores an empty added token
      if (a.content.size() > kMaxTokenBytes || !check_utf8(a.content).is_ok())
        return fail(Status::fail(o.where + ".content is longer than " + std::to_string(kMaxTokenBytes) +
                                 " bytes or not valid UTF-8"));
      for (const auto& [flag, out] : {std::pair<const char*, bool*>{"single_word", &a.single_word},
                                      {"lstrip", &a.lstrip},
                                      {"rstrip", &a.rstrip},
                                      {"normalized", &a.normalized},
                                      {"special", &a.special}})
        if (Status st = o.boolean(flag, *out); !st.is_ok()) return fail(st);
      if (!content_id.emplace(a.content, id).second)
        return fail(
            Status::fail(o.where + ": the content " + quote(a.content) + " is already an added token"));
      const auto index = static_cast<std::size_t>(id);
      if (index >= t.token.size()) t.token.resize(index + 1), written.resize(index + 1, nullptr);
      std::string shown = a.content;
      if (t.byte_level && from_byte_alphabet(a.content, raw)) shown = raw;
      t.token[index] = shown;
      if (t.special.size() <= index) t.special.resize(index + 1, false);
      t.special[index] = a.special;
      if (a.normalized) {
        // Normalized when the file is read, so bounded as a typed text is: each token, and all together.
        added_budget.allow(a.content.size());
        if (Status st = normalize(t.normalizers, a.content, kMaxNormalizedToken,
                                  "an added token's cap of " + std::to_string(kMaxNormalizedToken) + " bytes",
                                  added_budget);
            !st.is_ok())
          return fail(Status::fail(o.where + ": " + st.error));
        normalized_bytes += a.content.size();
        if (normalized_bytes > kMaxNormalizedAdded)
          return fail(Status::fail(o.where + ": the normalized added tokens are more than " +
                                   std::to_string(kMaxNormalizedAdded) + " bytes together"));
        if (!a.content.empty()) t.normalized_added.tokens.push_back(std::move(a));
      } else {
        t.raw_added.tokens.push_back(std::move(a));
      }
    }
  }
  t.raw_added.build();
  t.normalized_added.build();
  t.special.resize(t.token.size(), false);
  for (const std::vector<int>* list : {&t.prefix, &t.suffix})
    for (int id : *list)
      if (static_cast<std::size_t>(id) >= t.token.size() || t.token[static_cast<std::size_t>(id)].empty())
        return fail(
            Status::fail("post_processor: the special token id " + std::to_string(id) + " is not a token"));
  return Status::ok();
}

}  // namespace attnviz::hf
