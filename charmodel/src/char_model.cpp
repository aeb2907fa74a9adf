#include "streamvec/charmodel/char_model.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "device_encoder.h"
#include "ngram_bag.h"
#include "streamvec/charmodel/lstm_cell.h"

namespace streamvec {
namespace {

using Mat = RowMatrix<float>;
using MapC = Eigen::Map<const Mat>;
using MapM = Eigen::Map<Mat>;

constexpr char kMagic[8] = {'S', 'V', 'C', 'H', 'A', 'R', 'L', 'M'};
constexpr uint32_t kFormatVersion = 1;     // no n-gram bag
constexpr uint32_t kFormatVersionBag = 2;  // with one (CharModel::Serialize)
constexpr int kMaxNgramBuckets = 1 << 24;
constexpr size_t kMaxNgramFloats = size_t{1} << 28;  // 1 GiB of rows
constexpr int kMaxSize = 4096;  // bound on char_dim, hidden, dim read from bytes or flags

using Layout = internal::CharLayout;

Layout MakeLayout(const CharModelOptions& o) {
  Layout l;
  l.dim = o.dim;
  l.char_dim = o.char_dim;
  l.hidden = o.hidden;
  l.dirs = o.bidirectional ? 2 : 1;
  l.buckets = o.buckets;
  size_t at = 0;
  l.emb = at;
  at += size_t(l.buckets) * l.char_dim;
  for (int d = 0; d < l.dirs; ++d) {
    l.wx[d] = at;
    at += size_t(l.char_dim) * 4 * l.hidden;
    l.wh[d] = at;
    at += size_t(l.hidden) * 4 * l.hidden;
    l.b[d] = at;
    at += size_t(4) * l.hidden;
  }
  l.proj = at;
  at += size_t(l.dirs) * l.hidden * l.dim;
  l.proj_bias = at;
  at += l.dim;
  l.total = at;
  return l;
}

// Words a device pass reads at once when nothing is kept for a backward pass (Encode): bounds
// the device memory of encoding a whole vocabulary (about 1.4 KB per word and code point and
// direction at the defaults while the chunk runs).
constexpr size_t kDeviceEncodeWords = 32768;

// One group of words of equal sequence length, with what backward needs.
struct Group {
  std::vector<size_t> rows;  // positions of its words in the call
  std::vector<const std::vector<int32_t>*> ids;  // each word's characters as rows of Chars
  int length = 0;                                // T: code points + 2 marks
  std::vector<LstmStep<float>> steps[2];         // per direction and step
  Mat hcat;                                      // B x dirs*H: final hidden states
};

// The characters a call reads, and their input projections. The LSTM's x Wx for a character is
// row c of E Wx, so a call multiplies the U distinct rows of E it reads by Wx once (U x 4H per
// direction) and each step gathers its words' rows, where a product per step would multiply
// B x char_dim by char_dim x 4H at every step. Backward likewise adds each step's dL/da into the
// row of its character and multiplies once at the end: dWx += Eu^T dXW, dE(used) += dXW Wx^T.
// In the defaults (char_dim 20, hidden 50) that removes 2 of the 7 multiply-adds of a step.
struct Chars {
  std::vector<int32_t> used;  // the embedding rows (buckets) read, ascending
  Mat e;                      // U x char_dim: those rows of E
  Mat xw[2];                  // per direction, U x 4H: e Wx
};

}  // namespace

Status ValidateCharModelOptions(const CharModelOptions& o) {
  if (o.dim < 1 || o.dim > kMaxSize) return Status::InvalidArgument("--dim must be in [1, 4096]");
  if (o.char_dim < 1 || o.char_dim > 1024) {
    return Status::InvalidArgument("--char-dim must be in [1, 1024]");
  }
  if (o.hidden < 1 || o.hidden > 1024) {
    return Status::InvalidArgument("--char-hidden must be in [1, 1024]");
  }
  if (o.buckets < 3 || o.buckets > (1 << 22)) {
    return Status::InvalidArgument("--char-buckets must be in [3, 4194304]");
  }
  if (o.max_word_chars < 1 || o.max_word_chars > 1024) {
    return Status::InvalidArgument("--max-word-chars must be in [1, 1024]");
  }
  if (!(o.learning_rate > 0 && o.learning_rate < 1)) {
    return Status::InvalidArgument("--char-lr must be in (0, 1)");
  }
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) || !(o.adam_epsilon > 0)) {
    return Status::InvalidArgument("Adam: beta1 and beta2 must be in [0, 1), epsilon > 0");
  }
  if (o.ngram_buckets < 0 || o.ngram_buckets > kMaxNgramBuckets) {
    return Status::InvalidArgument("--char-ngram-buckets must be in [0, 16777216]");
  }
  if (size_t(o.ngram_buckets) * size_t(o.dim) > kMaxNgramFloats) {
    return Status::InvalidArgument("--char-ngram-buckets times --dim must be at most 2^28 (" +
                                   std::to_string(o.ngram_buckets) + " x " + std::to_string(o.dim) +
                                   ")");
  }
  if (!(o.ngram_rate > 0 && o.ngram_rate <= 10)) {
    return Status::InvalidArgument("--char-ngram-lr must be in (0, 10]");
  }
  return Status::Ok();
}

namespace {

// The first max_word_chars code points of `word` into *cps; the whole word is validated (a bad
// byte past the cut is an error too). Errors as CharIds.
Status DecodeWord(std::string_view word, int max_word_chars, std::vector<int32_t>* cps) {
  if (word.empty()) return Status::InvalidArgument("the word is empty");
  cps->clear();
  cps->reserve(std::min<size_t>(word.size(), size_t(max_word_chars)));
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(word.data());
  size_t at = 0;
  while (at < word.size()) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p + at, word.size() - at, &cp);
    if (n <= 0 || cp < 0) {
      return Status::InvalidArgument("invalid UTF-8 at byte " + std::to_string(at));
    }
    if (utf8proc_category(cp) == UTF8PROC_CATEGORY_CC) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
      return Status::InvalidArgument(std::string("control character ") + buf + " at byte " +
                                     std::to_string(at));
    }
    at += static_cast<size_t>(n);
    if (cps->size() < size_t(max_word_chars)) cps->push_back(cp);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<int32_t>> CharIds(std::string_view word, int buckets, int max_word_chars) {
  std::vector<int32_t> cps;
  SV_RETURN_IF_ERROR(DecodeWord(word, max_word_chars, &cps));
  std::vector<int32_t> ids;
  ids.reserve(cps.size() + 2);
  ids.push_back(0);  // begin mark
  for (int32_t cp : cps) {
    ids.push_back(2 + static_cast<int32_t>(static_cast<uint32_t>(cp) % uint32_t(buckets - 2)));
  }
  ids.push_back(1);  // end mark
  return ids;
}

StatusOr<std::vector<int32_t>> CharNgramIds(std::string_view word, int ngram_buckets,
                                            int max_word_chars) {
  if (ngram_buckets < 1) return Status::InvalidArgument("CharNgramIds: no n-gram buckets");
  std::vector<int32_t> symbols;
  SV_RETURN_IF_ERROR(DecodeWord(word, max_word_chars, &symbols));
  symbols.insert(symbols.begin(), 0x110000);  // begin mark: past the last code point
  symbols.push_back(0x110001);                // end mark
  std::vector<int32_t> ids;
  for (size_t n = 3; n <= 6 && n <= symbols.size(); ++n) {
    for (size_t at = 0; at + n <= symbols.size(); ++at) {
      uint32_t h = 2166136261u;  // FNV-1a, 32 bits
      for (size_t k = at; k < at + n; ++k) {
        const uint32_t v = static_cast<uint32_t>(symbols[k]);
        for (int b = 0; b < 4; ++b) {
          h ^= (v >> (8 * b)) & 0xffu;
          h *= 16777619u;
        }
      }
      ids.push_back(static_cast<int32_t>(h % uint32_t(ngram_buckets)));
    }
  }
  return ids;
}

struct CharModel::Impl {
  CharModelOptions options;
  Layout layout;
  std::vector<float> params, m, v;
  uint64_t steps = 0;
  // The n-gram bag (ngram_bag.h); empty without one.
  internal::NgramBag bag;

  // The device encoder (UseCudaDevice) and the version of params it was last handed: bumped by
  // every change (AdamStep, mutable_parameters, assignment).
  std::shared_ptr<internal::DeviceEncoder> device;
  int device_ordinal = -1;
  uint64_t version = 1;

  explicit Impl(const CharModelOptions& o)
      : options(o),
        layout(MakeLayout(o)),
        bag(o.ngram_buckets, o.dim, o.ngram_rate, o.max_word_chars) {
    params.assign(layout.total, 0.f);
    m.assign(layout.total, 0.f);
    v.assign(layout.total, 0.f);
  }

  MapC E() const { return MapC(params.data() + layout.emb, layout.buckets, layout.char_dim); }
  MapC Wx(int d) const {
    return MapC(params.data() + layout.wx[d], layout.char_dim, 4 * layout.hidden);
  }
  MapC Wh(int d) const {
    return MapC(params.data() + layout.wh[d], layout.hidden, 4 * layout.hidden);
  }
  MapC B(int d) const { return MapC(params.data() + layout.b[d], 1, 4 * layout.hidden); }
  MapC P() const {
    return MapC(params.data() + layout.proj, layout.dirs * layout.hidden, layout.dim);
  }
  MapC Pb() const { return MapC(params.data() + layout.proj_bias, 1, layout.dim); }

  // Ids of every word, or the first word's error.
  Status Ids(const std::vector<std::string_view>& words,
             std::vector<std::vector<int32_t>>* ids) const {
    ids->resize(words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      auto r = CharIds(words[i], layout.buckets, options.max_word_chars);
      if (!r.ok()) {
        std::string shown(words[i].substr(0, 64));
        for (char& c : shown) {
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        }
        return Status::InvalidArgument("word " + std::to_string(i) + " ('" + shown +
                                       "'): " + r.status().message());
      }
      (*ids)[i] = std::move(r).value();
    }
    return Status::Ok();
  }

  // The embedding rows *ids read, ascending, into *used; every id in *ids becomes its row there.
  // A table over the buckets where they are few (the default 2048: two passes over the ids), a
  // sort of the ids read where a table would be large.
  static void UsedRows(std::vector<std::vector<int32_t>>* ids, int buckets,
                       std::vector<int32_t>* used) {
    used->clear();
    if (buckets <= (1 << 16)) {
      std::vector<int32_t> row(size_t(buckets), -1);
      for (const auto& w : *ids) {
        for (int32_t id : w) row[size_t(id)] = 0;
      }
      for (int32_t b = 0; b < buckets; ++b) {
        if (row[size_t(b)] == 0) {
          row[size_t(b)] = static_cast<int32_t>(used->size());
          used->push_back(b);
        }
      }
      for (auto& w : *ids) {
        for (int32_t& id : w) id = row[size_t(id)];
      }
      return;
    }
    for (const auto& w : *ids) used->insert(used->end(), w.begin(), w.end());
    std::sort(used->begin(), used->end());
    used->erase(std::unique(used->begin(), used->end()), used->end());
    for (auto& w : *ids) {
      for (int32_t& id : w) {
        id = static_cast<int32_t>(std::lower_bound(used->begin(), used->end(), id) - used->begin());
      }
    }
  }

  // Replaces every id in *ids by its row in chars->used and computes chars' rows (Chars).
  void Compact(std::vector<std::vector<int32_t>>* ids, Chars* chars) const {
    UsedRows(ids, layout.buckets, &chars->used);
    const std::vector<int32_t>& used = chars->used;
    const MapC emb = E();
    chars->e.resize(static_cast<Eigen::Index>(used.size()), layout.char_dim);
    for (size_t u = 0; u < used.size(); ++u) chars->e.row(Eigen::Index(u)) = emb.row(used[u]);
    for (int d = 0; d < layout.dirs; ++d) {
      chars->xw[d].resize(chars->e.rows(), 4 * layout.hidden);
      MatMul<float>(chars->e, false, Wx(d), false, false, chars->xw[d]);
    }
  }

  // The words ids[begin, end) as a device pass reads them (device_encoder.h).
  internal::DeviceWords DeviceBatch(std::vector<std::vector<int32_t>> ids) const {
    internal::DeviceWords w;
    UsedRows(&ids, layout.buckets, &w.used);
    const size_t n = ids.size();
    w.order.resize(n);
    for (size_t i = 0; i < n; ++i) w.order[i] = static_cast<int32_t>(i);
    std::stable_sort(w.order.begin(), w.order.end(),
                     [&](int32_t a, int32_t b) { return ids[a].size() > ids[b].size(); });
    w.max_len = n > 0 ? static_cast<int>(ids[size_t(w.order[0])].size()) : 0;
    w.lengths.resize(n);
    w.ids.assign(n * size_t(w.max_len), 0);
    w.active.assign(size_t(w.max_len), 0);
    for (size_t k = 0; k < n; ++k) {
      const std::vector<int32_t>& word = ids[size_t(w.order[k])];
      w.lengths[k] = static_cast<int32_t>(word.size());
      std::copy(word.begin(), word.end(), w.ids.begin() + k * size_t(w.max_len));
      for (size_t t = 0; t < word.size(); ++t) ++w.active[t];
    }
    return w;
  }

  // Words grouped by sequence length (ascending), each group in call order.
  static std::vector<Group> Groups(const std::vector<std::vector<int32_t>>& ids) {
    std::map<size_t, Group> by_length;
    for (size_t i = 0; i < ids.size(); ++i) {
      Group& g = by_length[ids[i].size()];
      g.length = static_cast<int>(ids[i].size());
      g.rows.push_back(i);
      g.ids.push_back(&ids[i]);
    }
    std::vector<Group> groups;
    groups.reserve(by_length.size());
    for (auto& [len, g] : by_length) groups.push_back(std::move(g));
    return groups;
  }

  // Forward of one group; its outputs go to rows g.rows of `out` (n x dim). `keep`: the inputs
  // and steps stay in g for Backward.
  void Forward(Group* g, const Chars& chars, bool keep, float* out) const {
    const int H = layout.hidden, T = g->length;
    const Eigen::Index nb = static_cast<Eigen::Index>(g->rows.size());
    g->hcat.resize(nb, layout.dirs * H);
    Mat h, c;
    LstmStep<float> step;
    for (int d = 0; d < layout.dirs; ++d) {
      h.setZero(nb, H);
      c.setZero(nb, H);
      if (keep) g->steps[d].resize(T);
      for (int t = 0; t < T; ++t) {
        const int pos = d == 0 ? t : T - 1 - t;
        LstmStep<float>& s = keep ? g->steps[d][t] : step;
        s.gates.resize(nb, 4 * H);
        for (Eigen::Index r = 0; r < nb; ++r) s.gates.row(r) = chars.xw[d].row((*g->ids[r])[pos]);
        LstmCellForwardGates<float>(h, c, Wh(d), B(d), &s);
        h = s.h;
        c = s.c;
      }
      g->hcat.middleCols(d * H, H) = h;
    }
    Mat y(nb, layout.dim);
    MatMul<float>(g->hcat, false, P(), false, false, y);
    y.rowwise() += Pb().row(0);
    for (Eigen::Index r = 0; r < nb; ++r) {
      MapM(out + g->rows[r] * layout.dim, 1, layout.dim) = y.row(r);
    }
  }

  // Backward of one group kept by Forward: d_out (n x dim) -> gradient (flat, added).
  void Backward(const Group& g, const float* d_out, float* gradient, Mat* dxw) const {
    const int H = layout.hidden, T = g.length;
    const Eigen::Index nb = static_cast<Eigen::Index>(g.rows.size());
    Mat dy(nb, layout.dim);
    for (Eigen::Index r = 0; r < nb; ++r) {
      dy.row(r) = MapC(d_out + g.rows[r] * layout.dim, 1, layout.dim);
    }
    MapM dP(gradient + layout.proj, layout.dirs * H, layout.dim);
    MapM dPb(gradient + layout.proj_bias, 1, layout.dim);
    MatMul<float>(g.hcat, true, dy, false, true, dP);
    dPb.row(0) += dy.colwise().sum();
    Mat dhcat(nb, layout.dirs * H);
    MatMul<float>(dy, false, P(), true, false, dhcat);
    const Mat zeros = Mat::Zero(nb, H);
    LstmStepGrad<float> sg;
    for (int d = 0; d < layout.dirs; ++d) {
      MapM dWh(gradient + layout.wh[d], H, 4 * H);
      MapM dB(gradient + layout.b[d], 1, 4 * H);
      Mat dh = dhcat.middleCols(d * H, H);
      Mat dc = zeros;
      for (int t = T - 1; t >= 0; --t) {
        const Mat& h_prev = t > 0 ? g.steps[d][t - 1].h : zeros;
        const Mat& c_prev = t > 0 ? g.steps[d][t - 1].c : zeros;
        LstmCellBackwardGates<float>(h_prev, c_prev, Wh(d), g.steps[d][t], dh, dc, dWh, dB, &sg);
        const int pos = d == 0 ? t : T - 1 - t;
        for (Eigen::Index r = 0; r < nb; ++r) dxw[d].row((*g.ids[r])[pos]) += sg.d_a.row(r);
        dh.swap(sg.dh_prev);
        dc.swap(sg.dc_prev);
      }
    }
  }

  // dL/dWx and dL/dE from the gradients of the characters' input projections (Chars).
  void BackwardChars(const Chars& chars, const Mat* dxw, float* gradient) const {
    MapM dE(gradient + layout.emb, layout.buckets, layout.char_dim);
    Mat de(chars.e.rows(), layout.char_dim);
    for (int d = 0; d < layout.dirs; ++d) {
      MapM dWx(gradient + layout.wx[d], layout.char_dim, 4 * layout.hidden);
      MatMul<float>(chars.e, true, dxw[d], false, true, dWx);
      MatMul<float>(dxw[d], false, Wx(d), true, false, de);
      for (size_t u = 0; u < chars.used.size(); ++u)
        dE.row(chars.used[u]) += de.row(Eigen::Index(u));
    }
  }
};

CharModel::CharModel(const CharModelOptions& options) : impl_(std::make_unique<Impl>(options)) {
  SV_CHECK(ValidateCharModelOptions(options).ok());
  const Layout& l = impl_->layout;
  std::mt19937_64 rng(options.seed);
  auto fill = [&](size_t at, size_t n, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    for (size_t i = 0; i < n; ++i) impl_->params[at + i] = u(rng);
  };
  const float k = 1.0f / std::sqrt(static_cast<float>(l.hidden));
  fill(l.emb, size_t(l.buckets) * l.char_dim, k);
  for (int d = 0; d < l.dirs; ++d) {
    fill(l.wx[d], size_t(l.char_dim) * 4 * l.hidden, k);
    fill(l.wh[d], size_t(l.hidden) * 4 * l.hidden, k);
    for (int j = 0; j < 4 * l.hidden; ++j) {
      impl_->params[l.b[d] + j] = (j >= l.hidden && j < 2 * l.hidden) ? 1.f : 0.f;
    }
  }
  const int fan_in = l.dirs * l.hidden;
  fill(l.proj, size_t(fan_in) * l.dim, std::sqrt(6.0f / static_cast<float>(fan_in + l.dim)));
}

CharModel::CharModel(const CharModel& other) : impl_(std::make_unique<Impl>(*other.impl_)) {
  impl_->device.reset();  // a copy runs on the CPU (UseCudaDevice)
  impl_->device_ordinal = -1;
}
CharModel& CharModel::operator=(const CharModel& other) {
  if (this != &other) {
    impl_ = std::make_unique<Impl>(*other.impl_);
    impl_->device.reset();
    impl_->device_ordinal = -1;
  }
  return *this;
}
CharModel::~CharModel() = default;

const CharModelOptions& CharModel::options() const { return impl_->options; }
size_t CharModel::num_parameters() const { return impl_->layout.total; }
const float* CharModel::parameters() const { return impl_->params.data(); }
float* CharModel::mutable_parameters() {
  ++impl_->version;  // the caller may change them: the device copies them again
  return impl_->params.data();
}
uint64_t CharModel::adam_steps() const { return impl_->steps; }
const std::vector<float>& CharModel::ngram_rows() const { return impl_->bag.rows(); }

Status CharModel::UseCudaDevice(int ordinal) {
  if (ordinal < 0) {
    impl_->device.reset();
    impl_->device_ordinal = -1;
    return Status::Ok();
  }
  StatusOr<std::shared_ptr<internal::DeviceEncoder>> encoder =
      internal::MakeDeviceEncoder(ordinal, impl_->layout);
  if (!encoder.ok()) return encoder.status();
  impl_->device = std::move(encoder).value();
  impl_->device_ordinal = ordinal;
  return Status::Ok();
}

int CharModel::cuda_device() const { return impl_->device_ordinal; }

namespace {

// Row k of `sorted` (rows of dim floats, a device pass's order) to row order[k] of `out`.
void Unsort(const std::vector<int32_t>& order, const float* sorted, size_t dim, float* out) {
  for (size_t k = 0; k < order.size(); ++k) {
    std::copy(sorted + k * dim, sorted + (k + 1) * dim, out + size_t(order[k]) * dim);
  }
}

}  // namespace

Status CharModel::Encode(const std::vector<std::string_view>& words,
                         std::vector<float>* out) const {
  std::vector<std::vector<int32_t>> ids;
  SV_RETURN_IF_ERROR(impl_->Ids(words, &ids));
  const size_t dim = size_t(impl_->layout.dim);
  out->assign(words.size() * dim, 0.f);
  if (impl_->device) {
    std::vector<float> sorted;
    for (size_t begin = 0; begin < ids.size(); begin += kDeviceEncodeWords) {
      const size_t end = std::min(ids.size(), begin + kDeviceEncodeWords);
      const internal::DeviceWords w = impl_->DeviceBatch(
          {ids.begin() + std::ptrdiff_t(begin), ids.begin() + std::ptrdiff_t(end)});
      sorted.resize(w.size() * dim);
      SV_RETURN_IF_ERROR(internal::DeviceForward(impl_->device.get(), impl_->params.data(),
                                                 impl_->version, w, sorted.data(), nullptr));
      Unsort(w.order, sorted.data(), dim, out->data() + begin * dim);
    }
  } else {
    Chars chars;
    impl_->Compact(&ids, &chars);
    for (Group& g : Impl::Groups(ids)) impl_->Forward(&g, chars, /*keep=*/false, out->data());
  }
  impl_->bag.AddMeans(impl_->bag.Ids(words), out->data());
  return Status::Ok();
}

struct CharModel::Pass {
  std::vector<std::vector<int32_t>> ids;  // rows of chars; the groups point into these
  Chars chars;
  std::vector<Group> groups;
  // A device pass (UseCudaDevice): its buffers (released before the encoder: declared after it)
  // and its words' order (DeviceWords::order).
  std::shared_ptr<internal::DeviceEncoder> encoder;
  std::shared_ptr<internal::DevicePass> device;
  std::vector<int32_t> order;
  // Each word's n-gram bag rows (empty without a bag): DistillStep's bag step reads them.
  std::vector<std::vector<int32_t>> ngrams;
};

Status CharModel::ForwardLstm(const std::vector<std::string_view>& words, Pass* pass,
                              std::vector<float>* out) const {
  SV_RETURN_IF_ERROR(impl_->Ids(words, &pass->ids));
  out->assign(words.size() * impl_->layout.dim, 0.f);
  if (impl_->device) {
    internal::DeviceWords w = impl_->DeviceBatch(std::move(pass->ids));
    pass->ids.clear();
    std::vector<float> sorted(w.size() * size_t(impl_->layout.dim));
    pass->encoder = impl_->device;
    SV_RETURN_IF_ERROR(internal::DeviceForward(impl_->device.get(), impl_->params.data(),
                                               impl_->version, w, sorted.data(), &pass->device));
    Unsort(w.order, sorted.data(), size_t(impl_->layout.dim), out->data());
    pass->order = std::move(w.order);
  } else {
    impl_->Compact(&pass->ids, &pass->chars);
    pass->groups = Impl::Groups(pass->ids);
    for (Group& g : pass->groups) impl_->Forward(&g, pass->chars, /*keep=*/true, out->data());
  }
  pass->ngrams = impl_->bag.Ids(words);
  return Status::Ok();
}

StatusOr<std::shared_ptr<const CharModel::Pass>> CharModel::Forward(
    const std::vector<std::string_view>& words, std::vector<float>* out) const {
  auto pass = std::make_shared<Pass>();
  SV_RETURN_IF_ERROR(ForwardLstm(words, pass.get(), out));
  impl_->bag.AddMeans(pass->ngrams, out->data());
  return std::shared_ptr<const Pass>(std::move(pass));
}

Status CharModel::Backward(const Pass& pass, const float* d_out,
                           std::vector<float>* gradient) const {
  if (gradient->size() != impl_->layout.total) gradient->assign(impl_->layout.total, 0.f);
  if (pass.device) {
    const size_t dim = size_t(impl_->layout.dim);
    std::vector<float> sorted(pass.order.size() * dim);
    for (size_t k = 0; k < pass.order.size(); ++k) {
      const float* row = d_out + size_t(pass.order[k]) * dim;
      std::copy(row, row + dim, sorted.begin() + std::ptrdiff_t(k * dim));
    }
    return internal::DeviceBackward(pass.encoder.get(), pass.device.get(), sorted.data(),
                                    gradient->data());
  }
  Mat dxw[2];
  for (int d = 0; d < impl_->layout.dirs; ++d) {
    dxw[d].setZero(pass.chars.e.rows(), 4 * impl_->layout.hidden);
  }
  for (const Group& g : pass.groups) impl_->Backward(g, d_out, gradient->data(), dxw);
  impl_->BackwardChars(pass.chars, dxw, gradient->data());
  return Status::Ok();
}

StatusOr<double> CharModel::ComputeGradient(const std::vector<std::string_view>& words,
                                            const LossFunction& loss,
                                            std::vector<float>* gradient) const {
  std::vector<float> out;
  StatusOr<std::shared_ptr<const Pass>> pass = Forward(words, &out);
  if (!pass.ok()) return pass.status();
  std::vector<float> d_out(out.size(), 0.f);
  const double value = loss(out.data(), words.size(), d_out.data());
  SV_RETURN_IF_ERROR(Backward(**pass, d_out.data(), gradient));
  return value;
}

void CharModel::AdamStep(const std::vector<float>& gradient) {
  SV_CHECK(gradient.size() == impl_->layout.total);
  Impl& m = *impl_;
  const CharModelOptions& o = m.options;
  ++m.steps;
  ++m.version;
  const double t = static_cast<double>(m.steps);
  const float c1 = static_cast<float>(1.0 - std::pow(double(o.beta1), t));
  const float c2 = static_cast<float>(1.0 - std::pow(double(o.beta2), t));
  const Eigen::Index n = static_cast<Eigen::Index>(m.layout.total);
  Eigen::Map<const Eigen::ArrayXf> g(gradient.data(), n);
  Eigen::Map<Eigen::ArrayXf> p(m.params.data(), n), mm(m.m.data(), n), vv(m.v.data(), n);
  mm = o.beta1 * mm + (1 - o.beta1) * g;
  vv = o.beta2 * vv + (1 - o.beta2) * g.square();
  p -= o.learning_rate * (mm / c1) / ((vv / c2).sqrt() + o.adam_epsilon);
}

StatusOr<double> CharModel::DistillStep(const std::vector<std::string_view>& words,
                                        const float* targets, const std::vector<float>& weights) {
  if (weights.size() != words.size()) {
    return Status::InvalidArgument("DistillStep: " + std::to_string(weights.size()) +
                                   " weights for " + std::to_string(words.size()) + " words");
  }
  double total = 0;
  for (float w : weights) {
    if (!(w >= 0) || !std::isfinite(w)) {
      return Status::InvalidArgument("DistillStep: weights must be finite and >= 0");
    }
    total += w;
  }
  if (!(total > 0)) return Status::InvalidArgument("DistillStep: the weights are all 0");
  // ComputeGradient's parts, with the bag's forward and step one word at a time between the
  // LSTM's forward and backward.
  const size_t dim = size_t(impl_->layout.dim);
  Pass pass;
  std::vector<float> out;
  SV_RETURN_IF_ERROR(ForwardLstm(words, &pass, &out));
  const std::vector<std::vector<int32_t>>& ngrams = pass.ngrams;
  const bool bag = !ngrams.empty();
  std::vector<float> d_out(out.size()), d_word(dim);
  double l = 0;
  if (bag) impl_->bag.Prefetch(ngrams[0]);
  for (size_t i = 0; i < words.size(); ++i) {
    float* v = out.data() + i * dim;
    if (bag) {
      if (i + 1 < words.size()) impl_->bag.Prefetch(ngrams[i + 1]);
      impl_->bag.AddMean(ngrams[i], v);
    }
    const double w = weights[i] / total;
    const float* t = targets + i * dim;
    double l_i = 0;
    for (size_t j = 0; j < dim; ++j) {
      const double diff = double(v[j]) - t[j];
      l_i += diff * diff;
      d_out[i * dim + j] = static_cast<float>(2 * w * diff);
      d_word[j] = static_cast<float>(2 * weights[i] * diff);
    }
    l += w * l_i;
    if (bag) impl_->bag.Step(ngrams[i], d_word.data());
  }
  std::vector<float> gradient;
  SV_RETURN_IF_ERROR(Backward(pass, d_out.data(), &gradient));
  AdamStep(gradient);
  return l;
}

namespace {

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  bool Get(T* v) {
    if (b_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetFloats(std::vector<float>* v, size_t n) {
    if ((b_.size() - at_) / sizeof(float) < n) return false;
    v->resize(n);
    std::memcpy(v->data(), b_.data() + at_, n * sizeof(float));
    at_ += n * sizeof(float);
    return true;
  }
  size_t left() const { return b_.size() - at_; }

 private:
  std::string_view b_;
  size_t at_ = 0;
};

}  // namespace

std::string CharModel::Serialize(bool with_optimizer) const {
  const Impl& m = *impl_;
  const CharModelOptions& o = m.options;
  const bool bag = o.ngram_buckets > 0;
  std::string s(kMagic, sizeof kMagic);
  Put<uint32_t>(&s, bag ? kFormatVersionBag : kFormatVersion);
  Put<int32_t>(&s, o.dim);
  Put<int32_t>(&s, o.char_dim);
  Put<int32_t>(&s, o.hidden);
  Put<int32_t>(&s, o.bidirectional ? 1 : 0);
  Put<int32_t>(&s, o.buckets);
  Put<int32_t>(&s, o.max_word_chars);
  Put<float>(&s, o.learning_rate);
  Put<float>(&s, o.beta1);
  Put<float>(&s, o.beta2);
  Put<float>(&s, o.adam_epsilon);
  Put<uint64_t>(&s, o.seed);
  Put<uint64_t>(&s, m.layout.total);
  Put<uint8_t>(&s, with_optimizer ? 1 : 0);
  if (bag) {
    Put<int32_t>(&s, o.ngram_buckets);
    Put<float>(&s, o.ngram_rate);
  }
  auto floats = [&s](const std::vector<float>& v) {
    s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  floats(m.params);
  if (bag) floats(m.bag.rows());
  if (with_optimizer) {
    Put<uint64_t>(&s, m.steps);
    floats(m.m);
    floats(m.v);
    if (bag) floats(m.bag.accumulators());
  }
  return s;
}

StatusOr<std::unique_ptr<CharModel>> CharModel::Deserialize(std::string_view bytes) {
  auto bad = [](const std::string& what) { return Status::Corruption("character model: " + what); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return bad("not a streamvec character model (magic)");
  }
  Reader r(bytes.substr(sizeof kMagic));
  uint32_t version = 0;
  int32_t dim = 0, char_dim = 0, hidden = 0, bidi = 0, buckets = 0, max_chars = 0;
  CharModelOptions o;
  uint64_t total = 0;
  uint8_t with_optimizer = 0;
  if (!r.Get(&version)) return bad("truncated header");
  if (version != kFormatVersion && version != kFormatVersionBag) {
    return bad("format version " + std::to_string(version) + ", this build reads " +
               std::to_string(kFormatVersion) + " and " + std::to_string(kFormatVersionBag));
  }
  if (!r.Get(&dim) || !r.Get(&char_dim) || !r.Get(&hidden) || !r.Get(&bidi) || !r.Get(&buckets) ||
      !r.Get(&max_chars) || !r.Get(&o.learning_rate) || !r.Get(&o.beta1) || !r.Get(&o.beta2) ||
      !r.Get(&o.adam_epsilon) || !r.Get(&o.seed) || !r.Get(&total) || !r.Get(&with_optimizer)) {
    return bad("truncated header");
  }
  if (version == kFormatVersionBag) {
    if (!r.Get(&o.ngram_buckets) || !r.Get(&o.ngram_rate)) return bad("truncated header");
    if (o.ngram_buckets < 1) return bad("format 2 without n-gram buckets");
  }
  o.dim = dim;
  o.char_dim = char_dim;
  o.hidden = hidden;
  o.bidirectional = bidi != 0;
  o.buckets = buckets;
  o.max_word_chars = max_chars;
  if (Status s = ValidateCharModelOptions(o); !s.ok() || bidi < 0 || bidi > 1) {
    return bad("options out of range: " + s.message());
  }
  if (total != MakeLayout(o).total) return bad("parameter count does not match the options");
  // Before allocating: a header that names more rows than the bytes hold is refused as is.
  if (r.left() / sizeof(float) < total + size_t(o.ngram_buckets) * size_t(o.dim)) {
    return bad("truncated parameters");
  }
  auto model = std::make_unique<CharModel>(o);
  Impl& m = *model->impl_;
  if (!r.GetFloats(&m.params, total)) return bad("truncated parameters");
  std::vector<float>& bag_rows = m.bag.rows();
  if (!bag_rows.empty() && !r.GetFloats(&bag_rows, bag_rows.size())) {
    return bad("truncated n-gram rows");
  }
  if (with_optimizer == 1) {
    if (!r.Get(&m.steps) || !r.GetFloats(&m.m, total) || !r.GetFloats(&m.v, total)) {
      return bad("truncated optimizer state");
    }
    std::vector<float>& accumulators = m.bag.accumulators();
    if (!accumulators.empty() && !r.GetFloats(&accumulators, accumulators.size())) {
      return bad("truncated optimizer state");
    }
  } else if (with_optimizer != 0) {
    return bad("malformed optimizer flag");
  }
  if (r.left() != 0) return bad(std::to_string(r.left()) + " trailing bytes");
  for (float p : m.params) {
    if (!std::isfinite(p)) return bad("a parameter is not finite");
  }
  for (float p : bag_rows) {
    if (!std::isfinite(p)) return bad("an n-gram row is not finite");
  }
  return model;
}

}  // namespace streamvec
