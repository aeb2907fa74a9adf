// AnnIndex over hnswlib's HierarchicalNSW on scalar-quantised unit rows (distance = 1 - cosine).
#include "ann_index.h"

#include <hnswlib/hnswlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "streamvec/kernels/dot.h"

namespace streamvec::api {
namespace {

// Scalar quantisation (SQ8) of a unit row for the graph: one float step, max_i |x_i| / 127, then
// the dim int8 codes round(x_i / step). Cosine = step_a * step_b * <codes_a, codes_b> up to
// about dim * step^2 / 4 (a few 1e-3 for dim 100): close enough to walk the graph, while a row
// takes a quarter of its float bytes (the whole graph's rows fit a server CPU's cache, where the
// float rows did not). Search re-scores its candidates with the float rows (Served::Nearest).
// Rounded up to 4 bytes: hnswlib lays its elements out back to back (links, then these bytes,
// then the label), so an element's uint32 link counts stay aligned only when these are.
size_t CodeBytes(size_t dim) { return (sizeof(float) + dim + 3) / 4 * 4; }

void Quantize(const float* unit, size_t dim, unsigned char* out) {
  float largest = 0;
  for (size_t i = 0; i < dim; ++i) largest = std::max(largest, std::abs(unit[i]));
  const float step = largest > 0 && std::isfinite(largest) ? largest / 127.0f : 0.0f;
  std::memcpy(out, &step, sizeof step);
  auto* codes = reinterpret_cast<int8_t*>(out + sizeof step);
  for (size_t i = 0; i < dim; ++i) {
    codes[i] = step > 0
                   ? static_cast<int8_t>(std::lrint(std::clamp(unit[i] / step, -127.0f, 127.0f)))
                   : int8_t{0};
  }
}

// hnswlib's space over SQ8 rows: distance 1 - cosine, with our run-time chosen int8 dot product
// (hnswlib picks its SIMD level at compile time and has no int8 space).
class Sq8CosineSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit Sq8CosineSpace(size_t dim) : param_{dim, Int8DotFunction(DetectBestIsa())} {}
  size_t get_data_size() override { return CodeBytes(param_.dim); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &param_; }

 private:
  struct Param {
    size_t dim;
    Int8DotFn dot;
  };
  static float Distance(const void* a, const void* b, const void* param) {
    const Param& p = *static_cast<const Param*>(param);
    const auto* x = static_cast<const unsigned char*>(a);
    const auto* y = static_cast<const unsigned char*>(b);
    float step_x, step_y;  // memcpy: hnswlib's element layout does not align them
    std::memcpy(&step_x, x, sizeof step_x);
    std::memcpy(&step_y, y, sizeof step_y);
    const int32_t dot = p.dot(reinterpret_cast<const int8_t*>(x + sizeof(float)),
                              reinterpret_cast<const int8_t*>(y + sizeof(float)), p.dim);
    return 1.0f - step_x * step_y * static_cast<float>(dot);
  }
  Param param_;
};

// FNV-1a over the snapshot's words in row order (each followed by a 0 byte): which words, in
// which rows, an index was built over.
uint64_t WordsHash(const ServingSnapshot& snapshot) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (size_t r = 0; r < snapshot.rows(); ++r) {
    for (const char c : snapshot.word(r)) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  return h;
}

StatusOr<std::pair<uint64_t, uint64_t>> FileSizeAndHash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot read " + path);
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buf(size_t{1} << 20);
  uint64_t size = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    XXH64_update(state, buf.data(), n);
    size += n;
  }
  const uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  if (in.bad()) return Status::IoError("cannot read " + path);
  return std::make_pair(size, hash);
}

std::string Hex(uint64_t v) {
  std::ostringstream out;
  out << std::hex << v;
  return out.str();
}

}  // namespace

struct AnnIndex::Impl {
  explicit Impl(int dim) : space(static_cast<size_t>(dim)), dim(dim) {}
  Sq8CosineSpace space;
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
    std::vector<unsigned char> code(CodeBytes(static_cast<size_t>(dim)));
    for (size_t r = next++; r < rows; r = next++) {
      if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) return;
      snapshot.UnitVector(r, unit.data());
      Quantize(unit.data(), static_cast<size_t>(dim), code.data());
      impl->graph->addPoint(code.data(), static_cast<hnswlib::labeltype>(r));
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

Status AnnIndex::Save(const std::string& path, const ServingSnapshot& snapshot) const {
  // Per process: several servers may share a directory.
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  if (const std::filesystem::path parent = std::filesystem::path(path).parent_path();
      !parent.empty()) {
    std::error_code dir_error;
    std::filesystem::create_directories(parent, dir_error);
    if (dir_error)
      return Status::IoError("cannot create " + parent.string() + ": " + dir_error.message());
  }
  try {
    impl_->graph->saveIndex(tmp);
  } catch (const std::exception& e) {
    return Status::IoError("cannot write the index to " + tmp + ": " + e.what());
  }
  StatusOr<std::pair<uint64_t, uint64_t>> written = FileSizeAndHash(tmp);
  if (!written.ok()) return written.status();
  const nlohmann::json meta = {{"format", "streamvec-hnsw-sq8 1"},
                               {"snapshot", snapshot.version()},
                               {"rows", snapshot.rows()},
                               {"dim", snapshot.dim()},
                               {"words_xxh", Hex(WordsHash(snapshot))},
                               {"m", impl_->graph->M_},
                               {"ef_construction", impl_->graph->ef_construction_},
                               {"recall_at_10", recall_at_10_},
                               {"build_seconds", build_seconds_},
                               {"bytes", written->first},
                               {"xxh64", Hex(written->second)}};
  const std::string meta_tmp = path + ".json.tmp." + std::to_string(getpid());
  {
    std::ofstream out(meta_tmp, std::ios::trunc);
    out << meta.dump() << "\n";
    if (!out.flush()) return Status::IoError("cannot write " + meta_tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (!ec) std::filesystem::rename(meta_tmp, path + ".json", ec);
  if (ec) return Status::IoError("cannot rename the index into " + path + ": " + ec.message());
  return Status::Ok();
}

StatusOr<std::unique_ptr<AnnIndex>> AnnIndex::Load(const std::string& path,
                                                   const ServingSnapshot& snapshot,
                                                   const AnnOptions& options) {
  std::ifstream meta_in(path + ".json");
  if (!meta_in || !std::filesystem::exists(path)) return Status::NotFound("no index at " + path);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_in);
  } catch (const std::exception& e) {
    return Status::Corruption(path + ".json: " + e.what());
  }
  auto field = [&meta](const char* name) -> std::string {
    return meta.contains(name) ? meta[name].dump() : std::string("null");
  };
  const std::pair<const char*, std::string> expected[] = {
      {"format", nlohmann::json("streamvec-hnsw-sq8 1").dump()},
      {"snapshot", std::to_string(snapshot.version())},
      {"rows", std::to_string(snapshot.rows())},
      {"dim", std::to_string(snapshot.dim())},
      {"words_xxh", nlohmann::json(Hex(WordsHash(snapshot))).dump()}};
  for (const auto& [name, want] : expected) {
    if (field(name) != want) {
      return Status::InvalidArgument(path + " was saved for another snapshot: " + name + " " +
                                     field(name) + ", this snapshot's " + want);
    }
  }
  StatusOr<std::pair<uint64_t, uint64_t>> found = FileSizeAndHash(path);
  if (!found.ok()) return found.status();
  if (field("bytes") != std::to_string(found->first) ||
      field("xxh64") != nlohmann::json(Hex(found->second)).dump()) {
    return Status::Corruption(path + ": " + std::to_string(found->first) + " bytes with XXH64 " +
                              Hex(found->second) + ", saved " + field("bytes") + " bytes with " +
                              field("xxh64"));
  }
  const auto start = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>(snapshot.dim());
  try {
    impl->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(&impl->space, path, false,
                                                                    snapshot.rows());
  } catch (const std::exception& e) {
    return Status::Corruption(path + ": " + e.what());
  }
  if (impl->graph->cur_element_count != snapshot.rows() ||
      impl->graph->data_size_ != impl->space.get_data_size()) {
    return Status::Corruption(path + ": " + std::to_string(impl->graph->cur_element_count) +
                              " rows of " + std::to_string(impl->graph->data_size_) +
                              " bytes, not " + std::to_string(snapshot.rows()) + " of " +
                              std::to_string(impl->space.get_data_size()));
  }
  const size_t ef = static_cast<size_t>(std::max(options.ef_search, 10));
  impl->graph->setEf(ef);
  std::unique_ptr<AnnIndex> index(new AnnIndex(std::move(impl)));
  index->ef_search_ = ef;
  index->build_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return index;
}

std::vector<ServingSnapshot::Neighbor> AnnIndex::Search(const float* unit_query,
                                                        size_t count) const {
  std::vector<ServingSnapshot::Neighbor> out;
  const size_t n = impl_->graph->cur_element_count;
  if (count == 0 || n == 0) return out;
  std::vector<unsigned char> code(CodeBytes(static_cast<size_t>(impl_->dim)));
  Quantize(unit_query, static_cast<size_t>(impl_->dim), code.data());
  // searchKnn keeps max(ef, count) candidates and returns the best `count` of them.
  auto found = impl_->graph->searchKnn(code.data(), std::min(n, count));
  out.resize(found.size());
  for (size_t i = found.size(); i-- > 0; found.pop()) {  // the queue pops the worst first
    const auto [distance, label] = found.top();
    out[i] = {static_cast<size_t>(label), std::clamp(1.0f - distance, -1.0f, 1.0f)};
  }
  return out;
}

}  // namespace streamvec::api
