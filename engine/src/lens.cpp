// The causal tools over a pass's named points (attnviz/lens.hpp; docs/lens.md). Attribution is computed in
// double from the float32 activations the pass captured; the lens and the metrics use the pass's own kernels
// (final_logits), so the lens's last point is the model's logits.
#include "attnviz/lens.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "attnviz/saturating.hpp"
#include "common/thread_pool.hpp"
#include "simd/packed.hpp"

namespace attnviz {

namespace {

std::size_t at(int r, int cols) {
  return static_cast<std::size_t>(r) * static_cast<std::size_t>(cols);
}

// What a patching run keeps: no layer's attention, the metric's row of logits only (PassProbe::logits_row).
GptRequest metric_only() {
  GptRequest r;
  r.all_layers = false;
  r.top_k = 0;
  return r;
}

std::string head_name(const HeadRef& h) {
  return std::to_string(h.layer) + "." + std::to_string(h.head);
}

double dot(const float* x, const std::vector<double>& w) {
  double acc = 0.0;
  for (std::size_t j = 0; j < w.size(); ++j) acc += static_cast<double>(x[j]) * w[j];
  return acc;
}

// 1 / rms of x (n), as an RMSNorm computes it at eps.
double inverse_rms(const float* x, int n, double eps) {
  double sq = 0.0;
  for (int j = 0; j < n; ++j) sq += static_cast<double>(x[j]) * x[j];
  return 1.0 / std::sqrt(sq / n + eps);
}

}  // namespace

const char* to_string(AblationKind k) {
  return k == AblationKind::mean ? "mean" : "zero";
}

int Ablation::first_layer() const {
  int first = -1;
  for (const HeadRef& h : heads)
    if (first < 0 || h.layer < first) first = h.layer;
  return first;
}

Status check_ablation(const GptConfig& c, const Ablation& a) {
  for (std::size_t i = 0; i < a.heads.size(); ++i) {
    const HeadRef& h = a.heads[i];
    if (h.layer < 0 || h.layer >= c.n_layers || h.head < 0 || h.head >= c.n_heads)
      return Status::fail("head " + head_name(h) + " is not in the model (layers 0.." +
                          std::to_string(c.n_layers - 1) + ", heads 0.." + std::to_string(c.n_heads - 1) +
                          ")");
    for (std::size_t j = 0; j < i; ++j)
      if (a.heads[j] == h) return Status::fail("head " + head_name(h) + " is named twice");
  }
  return Status::ok();
}

Status parse_heads(const std::string& spec, std::vector<HeadRef>& heads) {
  heads.clear();
  const auto number = [](std::string_view s, int& v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() && v >= 0;
  };
  std::size_t i = 0;
  while (i <= spec.size()) {
    std::size_t end = spec.find(',', i);
    if (end == std::string::npos) end = spec.size();
    const std::string_view part(spec.data() + i, end - i);
    const std::size_t dot_at = part.find('.');
    HeadRef h;
    if (dot_at == std::string_view::npos || !number(part.substr(0, dot_at), h.layer) ||
        !number(part.substr(dot_at + 1), h.head))
      return Status::fail("\"" + std::string(part.substr(0, 40)) +
                          "\" is not a head: give LAYER.HEAD, such as 3.1");
    heads.push_back(h);
    if (heads.size() > 100000) return Status::fail("more than 100000 heads named");
    i = end + 1;
  }
  return Status::ok();
}

std::function<bool(int)> ablation_layers(const Ablation& a) {
  std::vector<int> layers;
  for (const HeadRef& h : a.heads) layers.push_back(h.layer);
  return [layers = std::move(layers)](int layer) {
    return std::find(layers.begin(), layers.end(), layer) != layers.end();
  };
}

std::function<bool(int, Tensor&)> ablation_edit(const GptConfig& c, const Ablation& a) {
  std::vector<std::vector<int>> by_layer(static_cast<std::size_t>(std::max(c.n_layers, 0)));
  for (const HeadRef& h : a.heads) by_layer[static_cast<std::size_t>(h.layer)].push_back(h.head);
  const int hd = c.head_dim();
  const AblationKind kind = a.kind;
  return [by_layer = std::move(by_layer), hd, kind](int layer, Tensor& context) {
    if (layer < 0 || static_cast<std::size_t>(layer) >= by_layer.size()) return false;
    const std::vector<int>& heads = by_layer[static_cast<std::size_t>(layer)];
    const int T = context.shape[0], width = context.shape[1];
    for (const int h : heads) {
      float* first = context.ptr() + at(h, hd);
      std::vector<float> value(static_cast<std::size_t>(hd), 0.0f);
      if (kind == AblationKind::mean) {  // each dimension's mean over the text's positions
        for (int x = 0; x < hd; ++x) {
          double sum = 0.0;
          for (int t = 0; t < T; ++t) sum += first[at(t, width) + static_cast<std::size_t>(x)];
          value[static_cast<std::size_t>(x)] = static_cast<float>(sum / T);
        }
      }
      for (int t = 0; t < T; ++t) std::copy(value.begin(), value.end(), first + at(t, width));
    }
    return !heads.empty();
  };
}

Status check_target(const GptConfig& c, int tokens, const LensTarget& t) {
  if (t.position < -1 || t.position >= tokens)
    return Status::fail("position " + std::to_string(t.position) + " is past the text's " +
                        std::to_string(tokens) + " tokens (positions 0.." + std::to_string(tokens - 1) + ")");
  for (const int id : {t.target, t.versus})
    if (id < -1 || id >= c.vocab_size)
      return Status::fail("token " + std::to_string(id) + " is outside the vocabulary (0.." +
                          std::to_string(c.vocab_size - 1) + ")");
  if (t.versus >= 0 && t.versus == t.target)
    return Status::fail("the versus token is the target itself: their difference is 0");
  return Status::ok();
}

std::vector<float> logits_at(const GptWeights& w, const Exec& exec, const PassProbe& probe, int position) {
  const Tensor& final = probe.resid.back();
  std::vector<float> logits(static_cast<std::size_t>(w.config.vocab_size));
  final_logits(w, exec, final.ptr() + at(position, final.shape[1]), 1, logits.data());
  return logits;
}

double metric_of(const float* logits, const LensTarget& t) {
  const double m = logits[t.target];
  return t.versus >= 0 ? m - static_cast<double>(logits[t.versus]) : m;
}

void logit_lens(const GptWeights& w, const Exec& exec, const PassProbe& probe, int top_k, int target,
                std::vector<LensPoint>& out, int first, const float* own, int own_position) {
  const int points = static_cast<int>(probe.resid.size());
  const int V = w.config.vocab_size, d = w.config.d_model;
  out.resize(static_cast<std::size_t>(points));
  // The rows to compute, every point's positions [first, T), go through the final norm and the unembedding
  // kRows at a time whatever point they come from: the unembedding (gpt2-small's is 154 MB) is read once per
  // kRows rows, not once per point, and a keystroke's new position at every point is one product.
  std::vector<std::pair<int, int>> todo;  // (point, position)
  const Isa isa = resolve(exec.isa);
  const auto finish = [&](int k, int t, const float* row) {
    LensPosition& lp = out[static_cast<std::size_t>(k)].positions[static_cast<std::size_t>(t)];
    lp.top = top_tokens(row, V, top_k, nullptr, isa, target, &lp.target_probability);
  };
  // The rows' top tokens and softmax (two lane-wide reads of the row each) on the pass's threads, each row
  // writing its own position.
  const int threads = isa == Isa::scalar ? 1 : resolve_threads(exec.threads);
  ThreadPool* pool = threads > 1 ? &ThreadPool::shared(threads) : nullptr;
  // Rows the pass computed with its own (PassProbe::lens: a keystroke's new position at every point).
  const bool computed = probe.lens_position >= 0 && probe.lens_logits.rank == 2 &&
                        probe.lens_logits.shape[0] == points && probe.lens_logits.shape[1] == V;
  std::vector<std::pair<int, const float*>> ready;  // (point, row) at lens_position
  for (int k = 0; k < points; ++k) {
    LensPoint& p = out[static_cast<std::size_t>(k)];
    p.after = k == 0 ? "embeddings" : "block " + std::to_string(k - 1);
    const int T = probe.resid[static_cast<std::size_t>(k)].shape[0];
    p.positions.resize(static_cast<std::size_t>(T));
    for (int t = std::max(first, 0); t < T; ++t)
      if (own && k == points - 1 && t == own_position)
        finish(k, t, own);  // the model's own logits, not computed again
      else if (computed && t == probe.lens_position)
        ready.emplace_back(k, probe.lens_logits.ptr() + at(k, V));
      else
        todo.emplace_back(k, t);
  }
  const auto ready_row = [&](int i, int) {
    const auto [k, from] = ready[static_cast<std::size_t>(i)];
    finish(k, probe.lens_position, from);
  };
  if (pool)
    pool->run(static_cast<int>(ready.size()), ready_row);
  else
    for (int i = 0; i < static_cast<int>(ready.size()); ++i) ready_row(i, 0);
  // (32, V) floats of logits at a time, not (T, V) per point; nothing where the pass computed every row (a
  // keystroke: 6 MB allocated and faulted in again, each time, cost 1-7 ms)
  const int kRows = static_cast<int>(std::min<std::size_t>(32, todo.size()));
  std::vector<float> rows(at(kRows, d)), logits(at(kRows, V));
  for (std::size_t i0 = 0; i0 < todo.size(); i0 += kRows) {
    const int n = static_cast<int>(std::min<std::size_t>(kRows, todo.size() - i0));
    for (int r = 0; r < n; ++r) {
      const auto [k, t] = todo[i0 + static_cast<std::size_t>(r)];
      const float* from = probe.resid[static_cast<std::size_t>(k)].ptr() + at(t, d);
      std::copy_n(from, d, rows.data() + at(r, d));
    }
    final_logits(w, exec, rows.data(), n, logits.data());
    const auto row = [&](int r, int) {
      const auto [k, t] = todo[i0 + static_cast<std::size_t>(r)];
      finish(k, t, logits.data() + at(r, V));
    };
    if (pool)
      pool->run(n, row);
    else
      for (int r = 0; r < n; ++r) row(r, 0);
  }
}

double Attribution::sum() const {
  double s = embeddings + final_bias;
  for (const auto& layer : heads)
    for (const double h : layer) s += h;
  for (const double b : attention_bias) s += b;
  for (const double m : mlp) s += m;
  return s;
}

Attribution attribute(const GptWeights& w, const Exec& exec, const PassProbe& probe, const LensTarget& t,
                      const float* logits) {
  const GptConfig& c = w.config;
  const GptArch& arch = c.arch;
  const int L = c.n_layers, H = c.n_heads, d = c.d_model, p = t.position;
  Attribution a;
  a.position = p, a.target = t.target, a.versus = t.versus;
  a.value = logits ? metric_of(logits, t) : metric_of(logits_at(w, exec, probe, p).data(), t);

  // `final` (d): what a component's vector at p is dotted with: the metric's direction in the unembedding, u,
  // times the final norm's scale and its 1/sigma (LayerNorm) or 1/rms (RMSNorm) frozen at their value for
  // the final residual at p, centred for a LayerNorm (its centring of each component moves onto the
  // direction: centre(x) . v = x . centre(v)). The final norm's shift goes through u on its own.
  const PackedMatrix& head = w.head();
  const float* x_final = probe.resid[static_cast<std::size_t>(L)].ptr() + at(p, d);
  double inv = 0.0;
  if (arch.norm == NormKind::layer_norm) {
    double mean = 0.0, var = 0.0;
    for (int j = 0; j < d; ++j) mean += x_final[j];
    mean /= d;
    for (int j = 0; j < d; ++j) var += (x_final[j] - mean) * (x_final[j] - mean);
    inv = 1.0 / std::sqrt(var / d + arch.norm_eps);
  } else {
    inv = inverse_rms(x_final, d, arch.norm_eps);
  }
  std::vector<double> final(static_cast<std::size_t>(d));
  for (int j = 0; j < d; ++j) {
    double u = head.at(t.target, j);
    if (t.versus >= 0) u -= head.at(t.versus, j);
    final[static_cast<std::size_t>(j)] = u * w.final_scale.data[static_cast<std::size_t>(j)];
    if (!w.final_shift.empty()) a.final_bias += u * w.final_shift.data[static_cast<std::size_t>(j)];
  }
  if (arch.norm == NormKind::layer_norm) {
    double mean = 0.0;
    for (const double v : final) mean += v;
    mean /= d;
    for (double& v : final) v -= mean;
  }
  for (double& v : final) v *= inv;

  a.embeddings = dot(probe.resid[0].ptr() + at(p, d), final);
  a.heads.assign(static_cast<std::size_t>(L), std::vector<double>(static_cast<std::size_t>(H), 0.0));
  a.attention_bias.assign(static_cast<std::size_t>(L), 0.0);
  a.mlp.assign(static_cast<std::size_t>(L), 0.0);
  // Each head's output at p: the pass's own where it computed them for p (PassProbe::head_out), else here
  // from its context vectors, with the same kernels (the same numbers).
  const bool captured = probe.head_out_position == p && probe.head_out.size() == static_cast<std::size_t>(L);
  std::vector<float> computed;
  for (int l = 0; l < L; ++l) {
    const GptBlock& b = w.blocks[static_cast<std::size_t>(l)];
    const std::size_t li = static_cast<std::size_t>(l);
    const bool sandwich = arch.residual == ResidualKind::sandwich;
    // A sandwich block's output norms, frozen at their 1/rms for the block's whole output at p.
    const auto frozen = [&](const Tensor& out) {
      return sandwich ? inverse_rms(out.ptr() + at(p, d), d, arch.norm_eps) : 1.0;
    };
    const auto through = [&](const Tensor& norm, double scale) {
      if (!sandwich) return final;
      std::vector<double> v(static_cast<std::size_t>(d));
      for (int j = 0; j < d; ++j)
        v[static_cast<std::size_t>(j)] =
            final[static_cast<std::size_t>(j)] * norm.data[static_cast<std::size_t>(j)] * scale;
      return v;
    };
    const std::vector<double> to_attn = through(b.post_attn_norm, frozen(probe.attn_out[li]));
    const float* outputs = nullptr;
    if (captured && probe.head_out[li].size() == at(H, d)) {
      outputs = probe.head_out[li].ptr();
    } else {
      computed.resize(at(H, d));
      head_outputs(w, exec, l, probe.context[li].ptr() + at(p, c.q_width()), computed.data());
      outputs = computed.data();
    }
    for (int h = 0; h < H; ++h) a.heads[li][static_cast<std::size_t>(h)] = dot(outputs + at(h, d), to_attn);
    if (!b.out_proj.bias.empty()) a.attention_bias[li] = dot(b.out_proj.bias.ptr(), to_attn);
    if (!c.attention_only)
      a.mlp[li] = dot(probe.mlp_out[li].ptr() + at(p, d), through(b.post_ff_norm, frozen(probe.mlp_out[li])));
  }
  return a;
}

std::uint64_t lens_bytes(const GptConfig& c, int tokens, const LensRequest& request, const GptRequest& pass) {
  if (!request.lens && !request.attribute && request.ablation.empty()) return 0;
  const std::uint64_t one = probe_bytes(c, tokens);
  // With heads ablated: the ablated pass's captures, and the pass itself (the view shows it; the clean one is
  // kept to extend), with the storage side passes keep
  std::uint64_t bytes =
      request.ablation.empty() ? one : sat_add(sat_add(one, one), pass_bytes(c, tokens, pass));
  if (request.lens) {
    // (L + 1) x T x k top tokens, each kept (16 bytes) and written as JSON (about 100 bytes with its piece):
    // counted at 128 bytes, whether or not JSON is asked for
    const std::uint64_t k = static_cast<std::uint64_t>(std::clamp(request.top_k, 0, c.vocab_size));
    const std::uint64_t entries = sat_mul(sat_mul(static_cast<std::uint64_t>(std::max(c.n_layers, 0)) + 1,
                                                  static_cast<std::uint64_t>(std::max(tokens, 0))),
                                          k);
    bytes = sat_add(bytes, sat_mul(entries, 128));
    // the logits it computes: a keystroke's L + 1 rows (PassProbe::lens_logits, kept), and 32 rows at a time
    const std::uint64_t rows = static_cast<std::uint64_t>(std::max(c.n_layers, 0)) + 1 + 32;
    bytes = sat_add(bytes, sat_mul(sat_mul(rows, static_cast<std::uint64_t>(std::max(c.vocab_size, 0))), 4));
  }
  return bytes;
}

std::uint64_t patching_bytes(const GptConfig& c, int tokens) {
  // the clean and the corrupted captures, a patched run's starting residual (T, d)
  const std::uint64_t start = sat_mul(sat_mul(static_cast<std::uint64_t>(std::max(tokens, 0)),
                                              static_cast<std::uint64_t>(std::max(c.d_model, 0))),
                                      sizeof(float));
  const std::uint64_t captures = sat_add(sat_add(probe_bytes(c, tokens), probe_bytes(c, tokens)), start);
  return sat_add(captures, pass_bytes(c, tokens, metric_only()));  // and a patched run's own pass
}

void CausalLens::lend(int layers) {
  for (auto points : {&PassProbe::resid, &PassProbe::context, &PassProbe::attn_out, &PassProbe::mlp_out,
                      &PassProbe::head_out}) {
    std::vector<Tensor>& clean = clean_.*points;
    std::vector<Tensor>& ablated = ablated_.*points;
    ablated.resize(std::max(ablated.size(), clean.size()));
    for (const int n : {lent_, layers})  // back what was lent, then lend [0, layers)
      for (int l = 0; l < n; ++l)
        std::swap(clean[static_cast<std::size_t>(l)], ablated[static_cast<std::size_t>(l)]);
  }
  lent_ = layers;
}

Status CausalLens::run(GptModel& model, const std::vector<int>& ids, const GptRequest& request,
                       const LensRequest& lr, GptResult& pass, LensResult& out) {
  const GptConfig& c = model.weights().config;
  const int T = static_cast<int>(ids.size());
  if (Status st = check_target(c, T, lr.target); !st.is_ok()) return st;
  if (Status st = check_ablation(c, lr.ablation); !st.is_ok()) return st;
  // The clean capture's points that the last ablated pass borrowed go back before anything else.
  lend(0);
  ablated_active_ = false;
  const bool ablate = !lr.ablation.empty();
  if (!ablate) model.forget_side();  // the ablated passes' storage, kept while heads are ablated
  // The clean pass: the view's own when nothing is ablated, extending the previous keystroke's.
  GptResult& clean = ablate ? clean_pass_ : pass;
  clean_.capture = true;
  clean_.lens = lr.lens && !ablate;  // with heads ablated the lens is the ablated pass's
  // Attribution's heads at its position, computed by the passes as they go.
  clean_.head_position = ablated_.head_position =
      lr.attribute ? (lr.target.position < 0 ? T - 1 : lr.target.position) : -1;
  const std::uint64_t previous_stamp = clean_.stamp;
  if (Status st = model.forward(ids, request, clean_, clean); !st.is_ok()) return st;
  if (ablate) {
    // From the first ablated block on, starting from the clean residual entering it; the earlier points are
    // the clean pass's.
    const int first = lr.ablation.first_layer();
    ablated_.capture = true;
    ablated_.start_layer = first;
    ablated_.start = &clean_.resid[static_cast<std::size_t>(first)];
    ablated_.edit_context = ablation_edit(c, lr.ablation);
    ablated_.edits = ablation_layers(lr.ablation);
    ablated_.lens = false;  // a pass from a later block: logit_lens computes every row
    lend(first);            // the clean points before it, not copied (taken back at the next run)
    ablated_.head_out_position = clean_.head_out_position;  // what the lent heads' outputs are for
    // Into the view's pass: its storage serves this one (it is replaced either way).
    const Status st = model.forward(ids, request, ablated_, pass);
    ablated_.start = nullptr;
    if (!st.is_ok()) {
      lend(0);  // the clean capture takes its points back: probe() is the clean one again
      return st;
    }
    std::vector<GptLayer> layers;
    for (GptLayer& layer : clean.layers)
      if (layer.index < first) layers.push_back(layer);
    for (GptLayer& layer : pass.layers) layers.push_back(std::move(layer));
    pass.layers = std::move(layers);
    ablated_active_ = true;
  }
  const PassProbe& probe = this->probe();
  const Exec& exec = model.options().exec;
  out = LensResult();
  out.target = lr.target;
  if (out.target.position < 0) out.target.position = T - 1;
  // The position's logits: the pass's own where it computed that row (the last, or every one), else its final
  // residual through the final norm and head.
  std::vector<float> own;
  const float* logits = nullptr;
  // The pass's own row at the position, or null where it did not compute it.
  const auto pass_row = [&]() -> const float* {
    const int rows = pass.logits.rank == 2 ? pass.logits.shape[0] : 0;
    if (rows == T) return pass.logits.ptr() + static_cast<std::size_t>(out.target.position) * c.vocab_size;
    return rows == 1 && out.target.position == T - 1 ? pass.logits.ptr() : nullptr;
  };
  const auto position_logits = [&]() {
    if (logits) return logits;
    logits = pass_row();
    if (!logits) {
      own = logits_at(model.weights(), exec, probe, out.target.position);
      logits = own.data();
    }
    return logits;
  };
  if (out.target.target < 0) {
    // The top next token: the pass's own where it found it (at the last position), else the logits' first
    // largest (top_tokens' order).
    if (out.target.position == T - 1 && !pass.next.empty()) {
      out.target.target = pass.next.front().id;
    } else {
      const float* row = position_logits();
      out.target.target = static_cast<int>(std::max_element(row, row + c.vocab_size) - row);
    }
    if (out.target.versus == out.target.target) {
      pass = GptResult();  // as forward() leaves a pass that fails after its input was checked
      return Status::fail("the versus token is the top next token, the target itself: their difference is 0");
    }
  }
  if (lr.lens) {
    // The lens of the positions the pass computed: a keystroke that extends the previous pass keeps the
    // earlier positions' points (causal: they cannot change), where they came from that pass's capture with
    // the same top k and target.
    const int lens_target = lr.target.target >= 0 ? out.target.target : -1;
    const bool extends = !ablate && clean.reused > 0 && lens_stamp_ == previous_stamp &&
                         lens_top_k_ == lr.top_k && lens_target_ == lens_target;
    // The position's own logits row where the pass has it or it was computed already; else the lens
    // computes it with the rest (not a product of its own, reading the whole head for one row).
    logit_lens(model.weights(), exec, probe, lr.top_k, lens_target, lens_, extends ? clean.reused : 0,
               logits ? logits : pass_row(), out.target.position);
    lens_stamp_ = ablate ? 0 : clean_.stamp;
    lens_top_k_ = lr.top_k, lens_target_ = lens_target;
    out.lens = lens_;
  }
  if (lr.attribute) {
    out.attribution = attribute(model.weights(), exec, probe, out.target, position_logits());
    out.attributed = true;
  }
  return Status::ok();
}

Status PatchJob::begin(const GptModel& model, const std::vector<int>& clean,
                       const std::vector<int>& corrupted, const LensTarget& target,
                       const Ablation& ablation) {
  *this = PatchJob();
  const GptConfig& c = model.weights().config;
  const int T = static_cast<int>(clean.size());
  if (corrupted.size() != clean.size())
    return Status::fail("the corrupted text has " + std::to_string(corrupted.size()) +
                        (corrupted.size() == 1 ? " token" : " tokens") + " and the clean one " +
                        std::to_string(clean.size()) + ": patching needs the same count");
  if (Status st = check_target(c, T, target); !st.is_ok()) return st;
  if (target.target < 0) return Status::fail("patching needs a target token");
  if (Status st = check_ablation(c, ablation); !st.is_ok()) return st;
  target_ = target;
  if (target_.position < 0) target_.position = T - 1;
  runner_ = std::make_unique<GptModel>(model.fork());
  corrupted_ = corrupted;
  ablate_ = ablation.empty() ? std::function<bool(int, Tensor&)>() : ablation_edit(c, ablation);
  ablates_ = ablation_layers(ablation);
  mean_ = !ablation.empty() && ablation.kind == AblationKind::mean;

  clean_ = clean;
  out_.difference = target_.versus >= 0;
  const double not_yet = std::numeric_limits<double>::quiet_NaN();
  out_.clean = out_.corrupted = not_yet;
  out_.residual.assign(static_cast<std::size_t>(c.n_layers),
                       std::vector<double>(static_cast<std::size_t>(T), not_yet));
  out_.heads.assign(static_cast<std::size_t>(c.n_layers),
                    std::vector<double>(static_cast<std::size_t>(c.n_heads), not_yet));
  total_ = c.n_layers * T + c.n_layers * c.n_heads;
  return Status::ok();
}

// Run `i` of the two the patched runs start from (0: clean, 1: corrupted), captured; after the second, the
// metric's span, which must not be 0.
Status PatchJob::base_run(int i) {
  PassProbe& probe = runs_[i];
  probe.capture = true;
  probe.edit_context = ablate_;
  probe.edits = ablates_;
  probe.logits_row = target_.position;
  GptResult r;
  if (Status st = runner_->forward(i == 0 ? clean_ : corrupted_, metric_only(), probe, r); !st.is_ok())
    return st;
  (i == 0 ? out_.clean : out_.corrupted) = metric_of(r.logits.ptr(), target_);
  probe.edit_context = nullptr;
  probe.edits = nullptr;
  if (i == 0) return Status::ok();
  clean_.clear();
  span_ = out_.clean - out_.corrupted;
  if (!(std::fabs(span_) > 1e-6 * std::max({1.0, std::fabs(out_.clean), std::fabs(out_.corrupted)})))
    return Status::fail("the clean and the corrupted texts give the same metric (" +
                        std::to_string(out_.clean) + "): there is nothing to patch");
  return Status::ok();
}

// The corrupted run from block l, its residual entering l `start`, with head `patched_head`'s context vectors
// taken from the clean run (-1: none) and the ablation applied: the metric's share of the way back to clean.
Status PatchJob::run_from(int l, const Tensor& start, int patched_head, double& entry) {
  const GptConfig& c = runner_->weights().config;
  const int T = static_cast<int>(corrupted_.size()), hd = c.head_dim(), QW = c.q_width();
  PassProbe probe;
  probe.start_layer = l, probe.start = &start, probe.logits_row = target_.position;
  if (patched_head >= 0)
    probe.edit_context = [&, l, patched_head](int layer, Tensor& ctx) {
      bool changed = false;
      if (layer == l) {
        const Tensor& clean_ctx = runs_[0].context[static_cast<std::size_t>(l)];
        for (int r = 0; r < T; ++r)
          std::copy_n(clean_ctx.ptr() + at(r, QW) + at(patched_head, hd), hd,
                      ctx.ptr() + at(r, QW) + at(patched_head, hd));
        changed = true;
      }
      if (ablate_ && ablate_(layer, ctx)) changed = true;
      return changed;
    };
  else
    probe.edit_context = ablate_;
  probe.edits = [this, l, patched_head](int layer) {
    return (patched_head >= 0 && layer == l) || ablates_(layer);
  };
  GptResult r;
  if (Status st = runner_->forward(corrupted_, metric_only(), probe, r); !st.is_ok()) return st;
  entry = (metric_of(r.logits.ptr(), target_) - out_.corrupted) / span_;
  return Status::ok();
}

Status PatchJob::step(int runs) {
  if (!runner_) return Status::fail("no patching has begun");
  const GptConfig& c = runner_->weights().config;
  const int T = static_cast<int>(corrupted_.size()), L = c.n_layers, d = c.d_model;
  int n = 0;
  for (; n < runs && based_ < 2; ++n) {  // the clean and the corrupted runs first, a run each
    if (Status st = base_run(based_); !st.is_ok()) {
      runner_.reset();  // nothing more to run
      return st;
    }
    ++based_;
  }
  for (; n < runs && done_ < total_; ++done_) {
    if (done_ < L * T) {  // the residual stream entering block l at position pos
      const int l = done_ / T, pos = done_ % T;
      const Tensor& a = runs_[0].resid[static_cast<std::size_t>(l)];
      const Tensor& b = runs_[1].resid[static_cast<std::size_t>(l)];
      double& entry = out_.residual[static_cast<std::size_t>(l)][static_cast<std::size_t>(pos)];
      // A row the two runs share changes nothing: 0. Nor does a position after the metric's, which the causal
      // mask hides from it, unless a mean ablation averages every position into each one.
      if ((pos > target_.position && !mean_) ||
          std::equal(a.ptr() + at(pos, d), a.ptr() + at(pos + 1, d), b.ptr() + at(pos, d))) {
        entry = 0.0;
        continue;
      }
      start_ = b;
      std::copy_n(a.ptr() + at(pos, d), d, start_.ptr() + at(pos, d));
      if (Status st = run_from(l, start_, -1, entry); !st.is_ok()) return st;
    } else {  // head h's context vectors in block l
      const int k = done_ - L * T, l = k / c.n_heads, h = k % c.n_heads;
      if (Status st = run_from(l, runs_[1].resid[static_cast<std::size_t>(l)], h,
                               out_.heads[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)]);
          !st.is_ok())
        return st;
    }
    ++n;
  }
  if (finished()) runner_->forget();  // its side passes' storage: the maps are all that is kept
  return Status::ok();
}

Status patch(const GptModel& model, const std::vector<int>& clean, const std::vector<int>& corrupted,
             const LensTarget& target, const Ablation& ablation, Patching& out,
             const std::function<bool(int, int)>& progress) {
  PatchJob job;
  if (Status st = job.begin(model, clean, corrupted, target, ablation); !st.is_ok()) return st;
  while (!job.finished()) {
    if (Status st = job.step(1); !st.is_ok()) return st;
    if (progress && !progress(job.done(), job.total()) && !job.finished())
      return Status::fail("patching was cancelled");
  }
  out = job.result();
  return Status::ok();
}

}  // namespace attnviz
