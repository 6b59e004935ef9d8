#include "attnviz/viz/model.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "attnviz/enum_names.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/saturating.hpp"
#include "attnviz/viz/arch.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {
namespace {

constexpr EnumName<ModelKind> kModelKindNames[] = {
    {ModelKind::layer, "layer"}, {ModelKind::seeded, "seeded"}, {ModelKind::file, "file"}};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* to_string(ModelKind k) {
  return name_in(kModelKindNames, k);
}

bool parse_model_kind(const std::string& s, ModelKind& out) {
  const std::optional<ModelKind> k = value_in(kModelKindNames, s);
  if (k) out = *k;
  return k.has_value();
}

void ModelSession::drop_job() {
  if (auto dropped = job_.drop(); dropped.second) orphans_.push_back(std::move(dropped));
  note_.clear();
}

void ModelSession::reset_pass() {
  drop_job();
  result_ = GptResult();
  pieces_.clear();
  kinds_.clear();
  sums_.clear();
  has_result_ = false;
  error_.clear();
  // The causal tools' captures and patching job were of the pass (and model) dropped.
  lens_ = CausalLens();
  lens_result_ = LensResult();
  has_lens_ = ablated_pass_ = false;
  causal_note_.clear();
  patch_.reset();
  last_patch_.reset();
  patch_running_ = patch_dirty_ = patch_waiting_ = false;
  patch_error_.clear();
  ++generation_;
}

void ModelSession::close() {
  model_.reset();
  choice_ = ModelChoice();
  reset_pass();
}

void ModelSession::share(const ModelSession& other) {
  if (!other.model_) {
    close();
    return;
  }
  auto m = std::make_unique<OpenedModel>();
  m->model = other.model_->model.fork();
  m->bpe = other.model_->bpe;
  m->seeded = other.model_->seeded;
  m->seed = other.model_->seed;
  m->vocab_from = other.model_->vocab_from;
  model_ = std::move(m);
  choice_ = other.choice_;
  exec = other.exec;
  free_memory = other.free_memory;
  reset_pass();
}

bool ModelSession::shares(const ModelSession& other) const {
  return model_ && other.model_ && &model_->model.weights() == &other.model_->model.weights();
}

Status ModelSession::open(const ModelChoice& choice) {
  if (choice.kind == ModelKind::layer) {
    close();
    return Status::ok();
  }
  const auto t0 = std::chrono::steady_clock::now();
  ModelSpec spec;
  spec.model = choice.kind == ModelKind::seeded ? choice.size : choice.path;
  spec.seed = choice.seed;
  spec.options.train = choice.train;
  spec.ids_only = choice.ids_only;
  spec.options.exec = exec;
  spec.memory_budget = free_memory ? free_memory() : available_memory_bytes();
  if (choice.kind == ModelKind::seeded && !find_gpt_preset(choice.size)) {
    error_ = "unknown GPT-2 size '" + choice.size + "' (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl)";
    return Status::fail(error_);
  }
  if (choice.kind == ModelKind::file && choice.path.empty()) {
    error_ = "no weights file given";
    return Status::fail(error_);
  }
  auto m = std::make_unique<OpenedModel>();
  if (Status st = open_model(spec, *m); !st.is_ok()) {
    error_ = st.error;
    return st;
  }
  model_ = std::move(m);
  choice_ = choice;
  reset_pass();
  if (detail_ >= config().n_layers) detail_ = -1;
  open_ms_ = ms_since(t0);
  return Status::ok();
}

const GptConfig& ModelSession::config() const {
  return model_->model.weights().config;
}

std::string ModelSession::label(int id) const {
  return model_->label(id);
}

bool ModelSession::ids_only() const {
  return model_ && model_->ids_only;
}

const Bpe& ModelSession::tokenizer() const {
  return model_->bpe;
}

std::string ModelSession::describe() const {
  if (!model_) return "no model";
  const GptConfig& c = config();
  char buf[256];
  const std::string source = choice_.kind == ModelKind::seeded
                                 ? choice_.size + ", seeded " + std::to_string(choice_.seed)
                                 : choice_.path;
  // The output head is counted when the weights have their own (the book's seeded GPTModel, untied files).
  const GptWeights& w = model_->model.weights();
  std::snprintf(buf, sizeof buf, "%s: %d layers x %d heads, d %d, context %d, %s%s", source.c_str(),
                c.n_layers, c.n_heads, c.d_model, c.context_length,
                format_parameters(parameter_count(c, w.tied())).c_str(),
                choice_.train ? ", train mode" : ", eval mode");
  // A loaded file also says which config.json it was read with, and what nothing could check.
  return buf + (w.config_from.empty() ? "" : "; config: " + w.config_from) +
         (w.note.empty() ? "" : "; " + w.note);
}

void ModelSession::set_detail_layer(int layer) {
  detail_ = model_ && layer >= 0 && layer < config().n_layers ? layer : -1;
}

const Result* ModelSession::layer(int index) const {
  const GptLayer* l = gpt_layer(index);
  return l ? &l->attention : nullptr;
}

const GptLayer* ModelSession::gpt_layer(int index) const {
  return has_result_ ? result_.layer(index) : nullptr;
}

GptRequest ModelSession::request() const {
  GptRequest r;
  r.detail_layer = detail_;
  r.top_k = 10;
  return r;
}

bool ModelSession::causal_on() const {
  // The probe's passes are evaluation passes: dropout's masks would make every point another pass's.
  return causal_.active() && model_ && !model_->model.options().train;
}

LensRequest ModelSession::lens_request() const {
  LensRequest lr;
  lr.lens = causal_.lens;
  lr.attribute = causal_.attribute;
  lr.target = causal_.target;
  lr.ablation = causal_.ablation;
  return lr;
}

void ModelSession::set_causal(const CausalTools& tools) {
  if (tools.corrupted.empty()) {  // no patching: its maps go with the text
    patch_.reset();
    last_patch_.reset();
    patch_running_ = patch_dirty_ = patch_waiting_ = false;
    patch_error_.clear();
  }
  causal_ = tools;
}

Status ModelSession::check_memory(const std::vector<int>& ids) const {
  const GptConfig& c = config();
  const GptRequest request = this->request();
  const int T = static_cast<int>(ids.size());
  const std::uint64_t budget = free_memory ? free_memory() : available_memory_bytes();
  // The last pass's storage serves a pass of about its size (the engine reuses a buffer of between the size
  // it needs and twice that); a larger pass allocates anew while the last one's is still held, so it must
  // fit in what is free now. (Counting the held storage as free let 3,200 tokens start and run out of
  // memory.)
  const std::uint64_t held = has_result_ ? pass_bytes(c, static_cast<int>(result_.ids.size()), request) : 0;
  const std::uint64_t need = pass_memory(c, T, request, false);
  const std::uint64_t room = budget && need <= held && need >= held / 2 ? std::max(budget, held) : budget;
  if (Status st = check_pass_memory(c, T, request, false, room, false); !st.is_ok()) return st;
  // The causal tools' captures (a second set where heads are ablated) are held beside the pass.
  const std::uint64_t captures = causal_on() ? lens_bytes(c, T, lens_request(), request) : 0;
  if (captures && room && sat_add(need, captures) > room)
    return Status::fail("the causal tools need " + format_bytes(captures) + " beside the pass's " +
                        format_bytes(need) + ", more than the " + format_bytes(room) +
                        " available: turn the lens, attribution and ablation off");
  return Status::ok();
}

Status ModelSession::run(const std::vector<int>& ids) {
  if (Status st = check_memory(ids); !st.is_ok()) return st;
  const GptRequest req = request();
  const std::vector<int> last = result_.ids;
  causal_note_ = causal_.active() && !causal_on()
                     ? "the causal tools need eval mode: turn train mode (dropout) off in the Model panel"
                     : "";
  const bool causal = causal_on();
  // An ablated pass's later layers are not the clean pass's: the head kinds' running sums start again
  // whenever a pass is ablated or follows one that was.
  if (causal && !causal_.ablation.empty()) ablated_pass_ = true;
  if (ablated_pass_) sums_.clear();
  if (!causal || causal_.ablation.empty()) ablated_pass_ = false;
  const auto pass = [&](const std::vector<int>& of, GptResult& out) {
    if (!causal) {
      model_->model.forget_side();  // an ablated view's storage, kept while heads were ablated
      return model_->model.forward(of, req, out);
    }
    LensResult found;
    Status st = lens_.run(model_->model, of, req, lens_request(), out, found);
    if (st.is_ok()) lens_result_ = std::move(found);
    return st;
  };
  Status st = pass(ids, result_);
  if (st.is_ok()) has_lens_ = causal;
  if (!st.is_ok() && result_.layers.empty() && has_result_) {
    // The failed pass took the previous result's storage: compute it again, so the view stays.
    GptResult again;
    if (!last.empty() && pass(last, again).is_ok())
      result_ = std::move(again);
    else
      has_result_ = has_lens_ = false;
  }
  return st;
}

Status ModelSession::begin_patching() {
  const auto refuse = [&](const std::string& why) {
    patch_error_ = why;
    return Status::fail(why);
  };
  if (!has_result_ || !has_lens_) return refuse("patching needs a pass of the typed text first");
  std::vector<int> corrupted;
  if (Status st = encode_for(*model_, causal_.corrupted, corrupted); !st.is_ok())
    return refuse("the corrupted text: " + st.error);
  const std::vector<int>& clean = result_.ids;
  if (corrupted.size() != clean.size())
    return refuse("the corrupted text has " + std::to_string(corrupted.size()) +
                  (corrupted.size() == 1 ? " token" : " tokens") + " and the typed one " +
                  std::to_string(clean.size()) + ": patching needs the same count");
  // The clean and the corrupted runs' captures and a patched run's, beside the view's pass and captures.
  const GptConfig& c = config();
  const int T = static_cast<int>(clean.size());
  const std::uint64_t budget = free_memory ? free_memory() : available_memory_bytes();
  const std::uint64_t extra = patching_bytes(c, T);
  if (budget && sat_add(sat_add(pass_bytes(c, T, request()), lens_bytes(c, T, lens_request(), request())),
                        extra) > budget)
    return refuse("patching needs " + format_bytes(extra) + " more for its runs' captures, more than the " +
                  format_bytes(budget) + " available: the lens and attribution run without it");
  auto job = std::make_unique<PatchJob>();
  if (Status st = job->begin(model_->model, clean, corrupted, lens_result_.target, causal_.ablation);
      !st.is_ok())
    return refuse(st.error);
  last_patch_ = std::move(patch_);
  last_clean_ = std::move(patch_clean_);
  last_tools_ = patch_tools_;
  patch_ = std::move(job);
  patch_clean_ = clean;
  patch_tools_ = causal_;
  patch_error_.clear();
  return Status::ok();
}

void ModelSession::step_patching(double now_ms, double budget_ms) {
  if (patch_dirty_) {  // the first frame that sees an edit starts the wait
    patch_dirty_ = false;
    patch_waiting_ = true;
    patch_edit_ms_ = now_ms;
  }
  if (patch_waiting_ && now_ms - patch_edit_ms_ >= patch_delay_ms) {
    patch_waiting_ = false;
    patch_running_ = model_ && causal_on() && !causal_.corrupted.empty() && begin_patching().is_ok();
  }
  if (!patch_running_) return;
  // A slice of patched runs: the page has one thread, and a frame must not wait long for them.
  const auto t0 = std::chrono::steady_clock::now();
  do {
    if (Status st = patch_->step(1); !st.is_ok()) {
      patch_error_ = st.error;
      patch_running_ = false;
      restore_last_patch();
      return;
    }
    if (patch_->measured()) last_patch_.reset();
  } while (!patch_->finished() && ms_since(t0) < budget_ms);
  if (patch_->finished()) patch_running_ = false;
}

void ModelSession::restore_last_patch() {
  if (!patch_ || patch_->measured()) return;  // the new job's maps are under way: they stay
  patch_ = std::move(last_patch_);
  patch_clean_ = std::move(last_clean_);
  patch_tools_ = last_tools_;
}

void ModelSession::cancel_patching() {
  if (patch_running_ && patch_)
    patch_error_ = "patching cancelled after " + std::to_string(patch_->done()) + " of " +
                   std::to_string(patch_->total()) + " runs";
  patch_running_ = patch_dirty_ = patch_waiting_ = false;
  restore_last_patch();
}

void ModelSession::adopt(double ms) {
  pieces_.clear();
  for (int id : result_.ids) pieces_.push_back(model_->label(id));
  for (GptLayer& l : result_.layers) l.attention.tokens = pieces_;  // the heatmaps' labels
  // A pass that extended the previous one (result_.reused rows kept) continues each head's sums over the new
  // rows only (HeadSums): typing at T = 1024 would otherwise read every head's whole weights again.
  const std::size_t L = result_.layers.size();
  const bool extends = result_.reused > 0 && sums_.size() == L;
  if (!extends) sums_.assign(L, {});
  kinds_.assign(L, {});
  std::vector<HeadTask> tasks;
  for (std::size_t l = 0; l < L; ++l) {
    const Result& a = result_.layers[l].attention;
    std::vector<HeadSums>& sums = sums_[l];
    if (sums.size() != static_cast<std::size_t>(a.shape.heads))
      sums.assign(static_cast<std::size_t>(a.shape.heads), {});
    kinds_[l].assign(static_cast<std::size_t>(a.shape.heads), {});
    for (int h = 0; h < a.shape.heads; ++h) {
      HeadSums& s = sums[static_cast<std::size_t>(h)];
      if (s.rows > result_.reused) s = HeadSums();  // rows past the kept prefix changed
      const MatrixDesc m = stage_matrix(a, StageId::weights, h);
      tasks.push_back({WeightsView{m.data, m.rows, m.cols, m.row_stride, m.multiplier}, &s,
                       &kinds_[l][static_cast<std::size_t>(h)]});
    }
  }
  // every head of every layer at once, over the passes' threads (at T = 512 gpt2-small's 144 heads read 19M
  // weights, and the entropy a logarithm for each)
  attnviz::score_heads(tasks, result_.ids, model_->model.options().exec);
  has_result_ = true;
  ++generation_;
  last_ms_ = ms;
}

Status ModelSession::recompute(const std::string& text) {
  const auto t0 = std::chrono::steady_clock::now();
  const long request = ++request_;
  text_ = text;
  if (!model_) {
    error_ = "no model is open";
    return Status::fail(error_);
  }
  std::vector<int> ids;
  Status st = encode_for(*model_, text, ids);
  if (st.is_ok()) st = check_memory(ids);
  std::string refused;  // why the offload could not take a pass it wanted
  const GptModel& gm = model_->model;
  // The causal tools capture and change the pass's named points (PassProbe), which only the engine's own
  // pass has: with them on, the pass runs here, never offloaded.
  if (st.is_ok() && offload && !cpu_only_ && !causal_on() &&
      offload->wants(gm.weights(), gm.options(), static_cast<int>(ids.size()),
                     gm.reusable(ids, this->request(), result_))) {
    error_.clear();
    if (computing()) return Status::ok();  // computed when the job in flight lands
    auto job = std::make_unique<GptResult>();
    const GptRequest req = this->request();
    if (Status begun = begin_gpt_forward(gm.weights(), gm.options(), ids, req, *job); begun.is_ok()) {
      pending_request_ = req;
      const int ticket = job_.hold(std::move(job), request, t0);
      offload->start(ticket, gm.shared_weights(), gm.options(), req, job_.job());
      return Status::ok();
    } else {
      refused = begun.error;
    }
  }
  if (st.is_ok()) st = run(ids);
  if (!st.is_ok()) {
    error_ = st.error;
    return st;
  }
  if (!refused.empty())
    note_ = refused + ": this pass was computed by the CPU engine instead";
  else if (!cpu_only_)
    note_.clear();  // computed here by choice, not as a fallback
  result_request_ = request;
  error_.clear();
  adopt(ms_since(t0));
  if (causal_on() && !causal_.corrupted.empty()) {  // the maps follow once the user stops typing
    patch_dirty_ = true;
    patch_running_ = patch_waiting_ = false;
  }
  return Status::ok();
}

void ModelSession::deliver(int ticket, Status outcome, double ms) {
  for (auto it = orphans_.begin(); it != orphans_.end(); ++it)
    if (it->first == ticket) {
      orphans_.erase(it);
      return;
    }
  std::unique_ptr<GptResult> r = job_.take(ticket);
  if (!r) return;
  if (outcome.is_ok()) outcome = end_gpt_forward(pending_request_, *r);
  if (outcome.is_ok()) {
    note_.clear();
    if (job_.request() > result_request_) {  // else a newer pass is on screen already
      r->seconds = ms / 1e3;
      result_ = std::move(*r);
      result_request_ = job_.request();
      error_.clear();
      has_lens_ = false;  // an offloaded pass is a plain one (the causal tools were off when it left)
      adopt(ms_since(job_.requested()));
    }
    // Edits made while the job was in flight; a failure stays in error() for the view to show.
    if (request_ > result_request_) (void)recompute(text_);
    return;
  }
  note_ = outcome.error + ": this pass was computed by the CPU engine instead";
  cpu_only_ = true;
  (void)recompute(text_);  // a failure stays in error() for the view to show
  cpu_only_ = false;
}

Status ModelSession::generate(std::string& text, int steps) {
  if (!model_) {
    error_ = "no model is open";
    return Status::fail(error_);
  }
  std::vector<int> ids;
  if (Status st = encode_for(*model_, text, ids); !st.is_ok()) {
    error_ = st.error;
    return st;
  }
  std::string appended = text;
  for (int s = 0; s < steps; ++s) {
    if (static_cast<int>(ids.size()) >= config().context_length) {
      error_ = "the text fills the context length " + std::to_string(config().context_length);
      return Status::fail(error_);
    }
    // The pass on screen is often of exactly these ids (whichever backend computed it): its argmax is the
    // step's. Otherwise the engine computes the pass now.
    if (!(has_result_ && result_.ids == ids && !result_.next.empty())) {
      const auto t0 = std::chrono::steady_clock::now();
      if (Status st = run(ids); !st.is_ok()) {
        error_ = st.error;
        return st;
      }
      result_request_ = ++request_;  // newer than a job in flight, which then lands unseen
      adopt(ms_since(t0));
    }
    const int next = result_.next.front().id;  // argmax, as torch.argmax
    ids.push_back(next);
    appended += model_->decode({next});
  }
  text = appended;
  return recompute(text);
}

std::optional<GptJsonLens> ModelSession::json_lens() const {
  if (!has_lens_) return std::nullopt;
  GptJsonLens lens;
  lens.result = &lens_result_;
  lens.ablation = &causal_.ablation;
  const LensTarget& t = patch_ ? patch_->target() : lens_result_.target;
  const bool current = patch_clean_ == result_.ids && patch_tools_ == causal_ &&
                       t.position == lens_result_.target.position && t.target == lens_result_.target.target &&
                       t.versus == lens_result_.target.versus;
  if (patch_ && patch_->finished() && !causal_.corrupted.empty() && current) {
    lens.patching = &patch_->result();
    lens.patched = patch_->target();
  }
  return lens;
}

}  // namespace attnviz::viz
