// AnnIndex over hnswlib's HierarchicalNSW with the inner-product space on unit rows
// (distance = 1 - cosine).
#include "ann_index.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "streamvec/kernels/dot.h"

namespace streamvec::api {
namespace {

// hnswlib's inner-product distance, 1 - <a, b>, on unit rows, with our run-time chosen dot
// product: hnswlib picks its SIMD level at compile time, so the portable build searched with its
// SSE loop even on AVX-512 machines.
class UnitInnerProductSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit UnitInnerProductSpace(size_t dim) : param_{dim, DotFunction(DetectBestIsa())} {}
  size_t get_data_size() override { return param_.dim * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &param_; }

 private:
  struct Param {
    size_t dim;
    DotFn dot;
  };
  static float Distance(const void* a, const void* b, const void* param) {
    const Param& p = *static_cast<const Param*>(param);
    return 1.0f - p.dot(static_cast<const float*>(a), static_cast<const float*>(b), p.dim);
  }
  Param param_;
};

}  // namespace

struct AnnIndex::Impl {
  explicit Impl(int dim) : space(static_cast<size_t>(dim)), dim(dim) {}
  UnitInnerProductSpace space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  int dim;
};

AnnIndex::AnnIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AnnIndex::~AnnIndex() = default;

std::unique_ptr<AnnIndex> AnnIndex::Build(const ServingSnapshot& snapshot,
                                          const AnnOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const size_t rows = snapshot.rows();
  const int dim = snapshot.dim();
  auto impl = std::make_unique<Impl>(dim);
  impl->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
      &impl->space, std::max<size_t>(rows, 1), static_cast<size_t>(options.m),
      static_cast<size_t>(options.ef_construction), /*random_seed=*/100);
  impl->graph->setEf(static_cast<size_t>(std::max(options.ef_search, 10)));
  // addPoint is thread-safe in hnswlib (per-node locks); rows are handed out by an atomic counter.
  std::atomic<size_t> next{0};
  auto insert = [&] {
    std::vector<float> unit(static_cast<size_t>(dim));
    for (size_t r = next++; r < rows; r = next++) {
      if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) return;
      snapshot.UnitVector(r, unit.data());
      impl->graph->addPoint(unit.data(), static_cast<hnswlib::labeltype>(r));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::max(options.threads, 1); ++t) threads.emplace_back(insert);
  insert();
  for (std::thread& t : threads) t.join();
  if (options.cancel != nullptr && options.cancel->load()) return nullptr;
  std::unique_ptr<AnnIndex> index(new AnnIndex(std::move(impl)));
  index->ef_search_ = static_cast<size_t>(std::max(options.ef_search, 10));
  index->build_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  return index;
}

std::vector<ServingSnapshot::Neighbor> AnnIndex::Search(const float* unit_query, size_t k,
                                                        std::span<const size_t> exclude) const {
  std::vector<ServingSnapshot::Neighbor> out;
  const size_t n = impl_->graph->cur_element_count;
  if (k == 0 || n == 0) return out;
  const size_t ask = std::min(n, k + exclude.size());
  auto found = impl_->graph->searchKnn(unit_query, ask);
  out.reserve(found.size());
  while (!found.empty()) {
    const auto [distance, label] = found.top();
    found.pop();
    const size_t row = static_cast<size_t>(label);
    if (std::find(exclude.begin(), exclude.end(), row) != exclude.end()) continue;
    out.push_back({row, std::clamp(1.0f - distance, -1.0f, 1.0f)});
  }
  std::sort(out.begin(), out.end(), ServingSnapshot::Neighbor::Better);
  if (out.size() > k) out.resize(k);
  return out;
}

}  // namespace streamvec::api
