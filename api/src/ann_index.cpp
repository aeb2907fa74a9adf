// AnnIndex over hnswlib's HierarchicalNSW on scalar-quantised unit rows (distance = 1 - cosine).
#include "ann_index.h"

#include <hnswlib/hnswlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

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

// The space's parameters (hnswlib's dist_func_param_): also read by SearchGraph, which scores a
// node's neighbours in one Int8DotMany call.
struct Sq8Param {
  size_t dim;
  Int8DotFn dot;
  Int8DotManyFn dot_many;
};

// The SQ8 distance from the dot of two rows' codes: the one expression both Distance and
// SearchGraph use, so that they agree to the bit.
inline float Sq8Distance(float step_x, float step_y, int32_t dot) {
  return 1.0f - step_x * step_y * static_cast<float>(dot);
}

// The float step that opens an SQ8 code (Quantize).
inline float Sq8Step(const void* code) {
  float step;  // memcpy: hnswlib's element layout does not align it
  std::memcpy(&step, code, sizeof step);
  return step;
}

// hnswlib's space over SQ8 rows: distance 1 - cosine, with our run-time chosen int8 dot product
// (hnswlib picks its SIMD level at compile time and has no int8 space).
class Sq8CosineSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit Sq8CosineSpace(size_t dim)
      : param_{dim, Int8DotFunction(DetectBestIsa()), Int8DotManyFunction(DetectBestIsa())} {}
  size_t get_data_size() override { return CodeBytes(param_.dim); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &param_; }

 private:
  static float Distance(const void* a, const void* b, const void* param) {
    const Sq8Param& p = *static_cast<const Sq8Param*>(param);
    const auto* x = static_cast<const unsigned char*>(a);
    const auto* y = static_cast<const unsigned char*>(b);
    const int32_t dot = p.dot(reinterpret_cast<const int8_t*>(x + sizeof(float)),
                              reinterpret_cast<const int8_t*>(y + sizeof(float)), p.dim);
    return Sq8Distance(Sq8Step(x), Sq8Step(y), dot);
  }
  Sq8Param param_;
};

// Asks for 2 MiB pages under hnswlib's element array (links, SQ8 codes and labels back to back:
// about 250 bytes a row, 55 MB at 220k rows, read at random by every search). With 4 KiB pages
// nearly every element a search visits is also a TLB miss and a page walk. `collapse`: the
// memory is already written (a loaded index), so it is collapsed into huge pages now
// (MADV_COLLAPSE, Linux 6.1+) rather than when khugepaged gets to it. Advisory: failure is
// harmless.
void AdviseHugePages(void* data, size_t bytes, bool collapse) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end <= begin) return;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  constexpr int kMadvCollapse = 25;  // <linux/mman.h>'s MADV_COLLAPSE; glibc lacks the name
  if (collapse) ::madvise(reinterpret_cast<void*>(begin), end - begin, kMadvCollapse);
#else
  (void)data, (void)bytes, (void)collapse;
#endif
}

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

using Graph = hnswlib::HierarchicalNSW<float>;
using hnswlib::tableint;

// Prefetches `bytes` from `p` into L1, one 64-byte line at a time.
inline void Prefetch(const char* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
  __builtin_prefetch(p + bytes - 1, 0, 3);
}

// A layer-0 candidate of the searches below: the ef nearest found so far, nearest first, each
// marked once expanded.
struct PoolEntry {
  float distance;
  tableint id;
  bool expanded;
};

// SEARCH-LAYER on layer 0 (Malkov & Yashunin 2018, algorithm 2) from `entry` with `ef`
// candidates, into `pool` (nearest first, at most ef). The steps, in the same order, of hnswlib
// 0.6's layer-0 search without deletions (searchBaseLayerST for queries, searchBaseLayer while
// inserting), so the same answers. The differences, all for speed at vocabularies whose graph
// is larger than the caches (220k rows: 55 MB, where a search touches thousands of elements and
// is bound by memory latency):
// - when a node is expanded, the codes of all its unvisited neighbours are prefetched before the
//   first distance is computed, so their cache misses overlap (hnswlib prefetches one line of the
//   next neighbour only), and scored in one Int8DotMany call (hnswlib: two indirect calls each);
// - the visited set takes a bit a node (27 KB at 220k nodes, a thread's own, in L1 or L2) where
//   hnswlib's takes two bytes (440 KB, whose random reads missed the caches on most visits; and
//   its pool takes a lock twice a search);
// - one sorted pool (as NSG's and DiskANN's searches keep it) replaces hnswlib's two heaps (`top`,
//   the ef nearest, and `candidates`, every unexpanded node): hnswlib expands its nearest
//   unexpanded candidate while that is no farther than the ef-th nearest, and every such
//   candidate is in the pool; a node enters when nearer than the ef-th (or the pool is not
//   full). Ties aside (equal SQ8 distances), the same expansions in the same order;
// - no statistics: hnswlib's searchKnn adds to two atomic counters per visited node, which
//   concurrent request threads bounce between cores.
// `nodes`: an upper bound of the node ids (the visited set's size). `read_links(node)` gives the
// node's layer-0 list as (pointer to its ids, count): in place for a built graph; a copy taken
// under the node's lock while other threads insert (the list changes under them).
template <typename ReadLinks>
void SearchLayer0(const Graph& g, const void* query, size_t ef, tableint entry,
                  float entry_distance, size_t nodes, ReadLinks read_links,
                  std::vector<PoolEntry>* pool_out) {
  const size_t code_bytes = g.data_size_;
  auto code = [&g](tableint id) { return g.getDataByInternalId(id); };
  thread_local std::vector<uint64_t> visited;
  visited.assign((nodes + 63) / 64, 0);
  auto seen = [](tableint id) {  // marks `id` visited; true when it already was
    uint64_t& word = visited[id >> 6];
    const uint64_t bit = uint64_t{1} << (id & 63);
    const bool was = (word & bit) != 0;
    word |= bit;
    return was;
  };
  std::vector<PoolEntry>& pool = *pool_out;
  pool.clear();
  pool.reserve(ef + 1);
  pool.push_back({entry_distance, entry, false});
  seen(entry);
  thread_local std::vector<tableint> fresh;
  thread_local std::vector<const int8_t*> fresh_codes;
  thread_local std::vector<int32_t> dots;
  fresh.resize(g.maxM0_);
  fresh_codes.resize(g.maxM0_);
  dots.resize(g.maxM0_);
  const Sq8Param& sq8 = *static_cast<const Sq8Param*>(g.dist_func_param_);
  const auto* query_codes = static_cast<const int8_t*>(query) + sizeof(float);
  const float query_step = Sq8Step(query);
  auto links = [&g](tableint id) { return g.data_level0_memory_ + id * g.size_data_per_element_; };
  for (size_t next = 0; next < pool.size();) {
    pool[next].expanded = true;
    const tableint node = pool[next].id;
    // The node expanded after this one, unless this one's neighbours displace it: its links.
    size_t after = next + 1;
    while (after < pool.size() && pool[after].expanded) ++after;
    if (after < pool.size()) Prefetch(links(pool[after].id), g.size_links_level0_);
    const auto [list, size] = read_links(node);
    size_t n = 0;
    for (size_t i = 0; i < size; ++i) {
      const tableint id = list[i];
      if (seen(id)) continue;
      const char* c = code(id);
      fresh[n] = id;
      fresh_codes[n++] = reinterpret_cast<const int8_t*>(c + sizeof(float));
      Prefetch(c, code_bytes);
    }
    sq8.dot_many(query_codes, fresh_codes.data(), n, sq8.dim, dots.data());
    size_t lowest = next + 1;  // entries before the lowest insertion stay expanded
    for (size_t i = 0; i < n; ++i) {
      const float d = Sq8Distance(query_step, Sq8Step(code(fresh[i])), dots[i]);
      if (pool.size() < ef || d < pool.back().distance) {
        const auto at =
            std::upper_bound(pool.begin(), pool.end(), d,
                             [](float x, const PoolEntry& e) { return x < e.distance; });
        const auto position = static_cast<size_t>(at - pool.begin());
        if (pool.size() == ef) pool.pop_back();
        pool.insert(pool.begin() + static_cast<std::ptrdiff_t>(position), {d, fresh[i], false});
        lowest = std::min(lowest, position);
      }
    }
    next = lowest;
    while (next < pool.size() && pool[next].expanded) ++next;
  }
}

// The HNSW search (Malkov & Yashunin 2018: greedy descent through the upper layers, then
// SearchLayer0 with ef candidates) over a built graph: the same steps, in the same order, as
// hnswlib 0.6's searchKnn without deletions, so the same answers.
// `start`: null, or the node where the layer-0 search starts (no descent; see AnnIndex::Search).
// Returns up to `count` (internal id, distance) pairs, nearest first, from max(ef, count)
// candidates.
std::vector<std::pair<float, tableint>> SearchGraph(const Graph& g, const void* query, size_t count,
                                                    size_t ef, const tableint* start) {
  std::vector<std::pair<float, tableint>> out;
  if (g.cur_element_count == 0 || count == 0) return out;
  ef = std::max(ef, count);
  const auto distance = g.fstdistfunc_;
  const void* param = g.dist_func_param_;
  const size_t code_bytes = g.data_size_;
  auto code = [&g](tableint id) { return g.getDataByInternalId(id); };

  tableint current = start != nullptr ? *start : g.enterpoint_node_;
  float current_distance = distance(query, code(current), param);
  for (int level = start != nullptr ? 0 : g.maxlevel_; level > 0; --level) {
    for (bool changed = true; changed;) {
      changed = false;
      const auto* list = reinterpret_cast<const tableint*>(g.get_linklist(current, level));
      const size_t size = g.getListCount(const_cast<tableint*>(list));
      for (size_t i = 1; i <= size; ++i) Prefetch(code(list[i]), code_bytes);
      for (size_t i = 1; i <= size; ++i) {
        const float d = distance(query, code(list[i]), param);
        if (d < current_distance) {
          current_distance = d;
          current = list[i];
          changed = true;
        }
      }
    }
  }
  thread_local std::vector<PoolEntry> pool;
  SearchLayer0(
      g, query, ef, current, current_distance, g.cur_element_count,
      [&g](tableint node) {
        const auto* list = reinterpret_cast<const tableint*>(g.get_linklist0(node));
        return std::pair(list + 1,
                         static_cast<size_t>(g.getListCount(const_cast<tableint*>(list))));
      },
      &pool);
  out.resize(std::min(count, pool.size()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = {pool[i].distance, pool[i].id};
  return out;
}

// Inserts `code` (SQ8, the space's data size) as `label` (new to the graph): INSERT (Malkov &
// Yashunin 2018, algorithm 1) as hnswlib 0.6's addPoint(code, label) does it, step for step and
// under the same locks, so that threads may insert at once and the graph is hnswlib's (its
// searches, saveIndex and loadIndex read it), except that the layer-0 candidates come from
// SearchLayer0 (each expanded node's list copied under its lock) in place of hnswlib's
// searchBaseLayer: layer 0 is where an insertion spends nearly all its time (every node is on
// it, with ef_construction candidates), and the same candidates cost about half as much. The
// upper layers (a node reaches layer l with probability M^-l) keep hnswlib's searches. The level
// is drawn under the element-count lock (hnswlib draws it unlocked: its generator is shared).
void Insert(Graph& g, const void* code, hnswlib::labeltype label) {
  tableint cur_c = 0;
  int curlevel = 0;
  {
    std::unique_lock<std::mutex> lock(g.cur_element_count_guard_);
    if (g.cur_element_count >= g.max_elements_)
      throw std::runtime_error("The number of elements exceeds the specified limit");
    cur_c = static_cast<tableint>(g.cur_element_count++);
    g.label_lookup_[label] = cur_c;
    curlevel = g.getRandomLevel(g.mult_);
  }
  std::unique_lock<std::mutex> lock_update(
      g.link_list_update_locks_[cur_c & (Graph::max_update_element_locks - 1)]);
  std::unique_lock<std::mutex> lock_element(g.link_list_locks_[cur_c]);
  g.element_levels_[cur_c] = curlevel;
  std::unique_lock<std::mutex> lock_top(g.global);
  const int maxlevel = g.maxlevel_;
  if (curlevel <= maxlevel) lock_top.unlock();
  tableint current = g.enterpoint_node_;
  std::memset(g.data_level0_memory_ + cur_c * g.size_data_per_element_ + g.offsetLevel0_, 0,
              g.size_data_per_element_);
  std::memcpy(g.getExternalLabeLp(cur_c), &label, sizeof label);
  std::memcpy(g.getDataByInternalId(cur_c), code, g.data_size_);
  if (curlevel > 0) {
    const size_t bytes = g.size_links_per_element_ * static_cast<size_t>(curlevel) + 1;
    g.linkLists_[cur_c] = static_cast<char*>(std::calloc(bytes, 1));
    if (g.linkLists_[cur_c] == nullptr) throw std::bad_alloc();
  }
  if (static_cast<int>(current) == -1) {  // the graph's first node (lock_top is held)
    // cur_c, not 0: with several threads, the one that took id 0 may reach the lock later.
    // (hnswlib writes 0 here and then cur_c, as below.)
    g.enterpoint_node_ = cur_c;
    g.maxlevel_ = curlevel;
    return;
  }
  const auto distance = g.fstdistfunc_;
  const void* param = g.dist_func_param_;
  if (curlevel < maxlevel) {  // greedy descent to the node's top layer
    float current_distance = distance(code, g.getDataByInternalId(current), param);
    for (int level = maxlevel; level > curlevel; --level) {
      for (bool changed = true; changed;) {
        changed = false;
        std::unique_lock<std::mutex> lock(g.link_list_locks_[current]);
        const unsigned int* list = g.get_linklist(current, level);
        const size_t size = g.getListCount(const_cast<unsigned int*>(list));
        const auto* ids = reinterpret_cast<const tableint*>(list + 1);
        for (size_t i = 0; i < size; ++i) {
          const float d = distance(code, g.getDataByInternalId(ids[i]), param);
          if (d < current_distance) {
            current_distance = d;
            current = ids[i];
            changed = true;
          }
        }
      }
    }
  }
  thread_local std::vector<PoolEntry> pool;
  thread_local std::vector<tableint> copied;
  copied.resize(g.maxM0_);
  for (int level = std::min(curlevel, maxlevel); level >= 0; --level) {
    std::priority_queue<std::pair<float, tableint>, std::vector<std::pair<float, tableint>>,
                        Graph::CompareByFirst>
        candidates;
    if (level > 0) {
      candidates = g.searchBaseLayer(current, code, level);
    } else {
      SearchLayer0(
          g, code, g.ef_construction_, current,
          distance(code, g.getDataByInternalId(current), param), g.max_elements_,
          [&g](tableint node) {
            std::unique_lock<std::mutex> lock(g.link_list_locks_[node]);
            const unsigned int* list = g.get_linklist0(node);
            const size_t size = g.getListCount(const_cast<unsigned int*>(list));
            std::memcpy(copied.data(), list + 1, size * sizeof(tableint));
            return std::pair<const tableint*, size_t>(copied.data(), size);
          },
          &pool);
      for (const PoolEntry& e : pool) candidates.emplace(e.distance, e.id);
    }
    current = g.mutuallyConnectNewElement(code, cur_c, candidates, level, false);
  }
  if (curlevel > maxlevel) {  // lock_top is held
    g.enterpoint_node_ = cur_c;
    g.maxlevel_ = curlevel;
  }
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
  AdviseHugePages(impl->graph->data_level0_memory_,
                  impl->graph->max_elements_ * impl->graph->size_data_per_element_, false);
  impl->graph->setEf(static_cast<size_t>(std::max(options.ef_search, 10)));
  // Insert, as hnswlib's addPoint, is thread-safe (per-node locks); rows are handed out by an
  // atomic counter.
  std::atomic<size_t> next{0};
  auto insert = [&] {
    std::vector<float> unit(static_cast<size_t>(dim));
    std::vector<unsigned char> code(CodeBytes(static_cast<size_t>(dim)));
    for (size_t r = next++; r < rows; r = next++) {
      if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) return;
      snapshot.UnitVector(r, unit.data());
      Quantize(unit.data(), static_cast<size_t>(dim), code.data());
      if (options.hnswlib_insert) {
        impl->graph->addPoint(code.data(), static_cast<hnswlib::labeltype>(r));
      } else {
        Insert(*impl->graph, code.data(), static_cast<hnswlib::labeltype>(r));
      }
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
  AdviseHugePages(impl->graph->data_level0_memory_,
                  impl->graph->max_elements_ * impl->graph->size_data_per_element_, true);
  const size_t ef = static_cast<size_t>(std::max(options.ef_search, 10));
  impl->graph->setEf(ef);
  std::unique_ptr<AnnIndex> index(new AnnIndex(std::move(impl)));
  index->ef_search_ = ef;
  index->build_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return index;
}

std::vector<ServingSnapshot::Neighbor> AnnIndex::Search(const float* unit_query, size_t count,
                                                        std::optional<size_t> start_row) const {
  std::vector<ServingSnapshot::Neighbor> out;
  const Graph& g = *impl_->graph;
  const size_t n = g.cur_element_count;
  if (count == 0 || n == 0) return out;
  std::vector<unsigned char> code(CodeBytes(static_cast<size_t>(impl_->dim)));
  Quantize(unit_query, static_cast<size_t>(impl_->dim), code.data());
  std::optional<tableint> start;  // the internal id of start_row, when indexed
  if (start_row) {
    const auto it = g.label_lookup_.find(static_cast<hnswlib::labeltype>(*start_row));
    if (it != g.label_lookup_.end()) start = it->second;
  }
  const auto found =
      SearchGraph(g, code.data(), std::min(n, count), g.ef_, start ? &*start : nullptr);
  out.reserve(found.size());
  for (const auto& [distance, id] : found) {
    out.push_back(
        {static_cast<size_t>(g.getExternalLabel(id)), std::clamp(1.0f - distance, -1.0f, 1.0f)});
  }
  return out;
}

std::vector<ServingSnapshot::Neighbor> AnnIndex::SearchWithHnswlib(const float* unit_query,
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
