#include "oov_eval.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "streamvec/charmodel/char_model.h"
#include "streamvec/eval/similarity.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/snapshot_reader.h"

namespace streamvec::app {
namespace {

using json = nlohmann::json;

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "streamvec eval: error: %s\n", message.c_str());
  return code;
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    ab += double(a[j]) * b[j];
    aa += double(a[j]) * a[j];
    bb += double(b[j]) * b[j];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

struct Part {
  std::vector<double> gold, cosine;
  json Json() const {
    const double rho = gold.size() >= 2 ? eval::SpearmanCorrelation(gold, cosine) : NAN;
    return {{"pairs", gold.size()}, {"spearman", std::isfinite(rho) ? json(rho) : json(nullptr)}};
  }
};

}  // namespace

int RunOovEval(const OovEvalFlags& f) {
  if (f.state.empty()) return Fail("--oov needs --state DIR", 2);
  if (f.similarity.empty()) return Fail("--oov needs at least one --similarity FILE", 2);
  auto reader = SnapshotReader::OpenNewest(f.state);
  if (!reader.ok()) return Fail("--state " + f.state + ": " + reader.status().message(), 2);
  const auto get = [&](const std::string& key) { return (*reader)->Get(key); };
  StatusOr<Embeddings> table = ReadEmbeddingEntries(get);
  if (!table.ok()) return Fail("--state " + f.state + ": " + table.status().message(), 2);
  StatusOr<std::string> bytes = (*reader)->Get(kCharModelEntry);
  if (!bytes.ok()) {
    return Fail("--state " + f.state +
                    ": the snapshot has no character model (train it with "
                    "--char-distill)",
                2);
  }
  StatusOr<std::unique_ptr<CharModel>> model = CharModel::Deserialize(*bytes);
  if (!model.ok()) return Fail("--state " + f.state + ": " + model.status().message(), 2);
  if ((*model)->options().dim != table->dim) {
    return Fail("--state " + f.state + ": the character model's dim differs from the table's", 2);
  }
  // Rows are most frequent first: the first table_top of them are the table's words.
  const size_t rows = f.table_top > 0 ? std::min(f.table_top, table->rows()) : table->rows();
  std::unordered_map<std::string, size_t> row_of;
  for (size_t r = 0; r < rows; ++r) row_of.emplace(table->words[r], r);
  const int dim = table->dim;

  json out = {{"state", f.state},
              {"snapshot", (*reader)->version()},
              {"table_words", rows},
              {"similarity", json::array()}};
  if (!f.json) {
    std::printf("%-28s %6s %8s %14s %14s %14s\n", "file", "pairs", "skipped", "table rho (n)",
                "oov rho (n)", "all rho");
  }
  for (const std::string& path : f.similarity) {
    std::ifstream in(path);
    if (!in) return Fail("--similarity: cannot open " + path, 2);
    Part table_pairs, oov_pairs, all;
    size_t total = 0, skipped = 0;
    std::string line;
    // A word's vector: its table row (exact, then lower-cased), else the character model's.
    auto vector_of = [&](const std::string& w, std::vector<float>* v, bool* from_table) {
      auto it = row_of.find(w);
      if (it == row_of.end()) it = row_of.find(Lower(w));
      if (it != row_of.end()) {
        const float* row = table->row(it->second);
        v->assign(row, row + dim);
        *from_table = true;
        return true;
      }
      *from_table = false;
      return (*model)->Encode({Lower(w)}, v).ok();
    };
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string w1, w2, score;
      if (!std::getline(fields, w1, '\t') || !std::getline(fields, w2, '\t') ||
          !std::getline(fields, score)) {
        continue;
      }
      double gold = 0;
      try {
        gold = std::stod(score);
      } catch (const std::exception&) {
        continue;
      }
      ++total;
      std::vector<float> v1, v2;
      bool t1 = false, t2 = false;
      if (!vector_of(w1, &v1, &t1) || !vector_of(w2, &v2, &t2)) {
        ++skipped;  // a word the character model cannot read (never for letters)
        continue;
      }
      const double cos = Cosine(v1, v2);
      Part& part = t1 && t2 ? table_pairs : oov_pairs;
      part.gold.push_back(gold);
      part.cosine.push_back(cos);
      all.gold.push_back(gold);
      all.cosine.push_back(cos);
    }
    if (total == 0) return Fail("--similarity: " + path + " holds no word pair", 2);
    json r = {{"file", path},
              {"total", total},
              {"skipped", skipped},
              {"table", table_pairs.Json()},
              {"oov", oov_pairs.Json()},
              {"all", all.Json()}};
    if (!f.json) {
      auto rho = [](const json& j) {
        char buf[32];
        if (j["spearman"].is_null()) return std::string("-");
        std::snprintf(buf, sizeof buf, "%.4f", j["spearman"].get<double>());
        return std::string(buf);
      };
      std::string name = path.substr(path.find_last_of('/') + 1);
      std::printf("%-28s %6zu %8zu %7s (%4zu) %7s (%4zu) %14s\n", name.c_str(), total, skipped,
                  rho(r["table"]).c_str(), table_pairs.gold.size(), rho(r["oov"]).c_str(),
                  oov_pairs.gold.size(), rho(r["all"]).c_str());
    }
    out["similarity"].push_back(std::move(r));
  }
  if (f.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace streamvec::app
