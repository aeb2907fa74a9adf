// Writes the fuzzer's seed messages into the directory given (bench/param/seeds/): one message
// of each kind with records at both precisions, with every record shape, and a gap. Built and run
// by `bench/param/fuzz --seeds`; the committed seeds are its output.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "streamvec/param/protocol.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  using namespace streamvec;
  std::vector<ParamRecord> push(4), rows(2), vocab(2);
  const char* words[] = {"the", "caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "x"};
  for (int i = 0; i < 4; ++i) {
    push[i].word = words[i];
    if (i != 1) {
      push[i].has_count = true;
      push[i].count = 3.0 + i;
    }
    if (i != 0) push[i].input = {0.5f, -0.25f, 1e-3f, -7.0f};
    if (i == 3) push[i].output = {0.0f, -0.0f, 65504.0f, 1e-7f};
  }
  for (int i = 0; i < 2; ++i) {
    rows[i].word = words[i];
    rows[i].input = {0.1f, 0.2f, 0.3f, 0.4f};
  }
  rows[1].output = {-0.1f, -0.2f, -0.3f, -0.4f};
  rows[1].has_count = true;
  rows[1].count = 10.0;
  rows[1].count_error = 2.0;
  vocab[0].word = "the";
  vocab[0].has_count = true;
  vocab[0].count = 1e6;
  vocab[0].count_error = 5;
  vocab[1].word = "gone";
  vocab[1].removed = true;
  int written = 0;
  for (ParamPrecision p : {ParamPrecision::kFp32, ParamPrecision::kFp16}) {
    for (ParamMessageKind kind :
         {ParamMessageKind::kPush, ParamMessageKind::kRows, ParamMessageKind::kVocabulary}) {
      ParamMessageHeader h;
      h.kind = kind;
      h.precision = p;
      h.dim = 4;
      h.sender = 3;
      h.sequence = 42;
      h.sender_clock = 1000000;
      h.base_clock = kind == ParamMessageKind::kPush ? 990000 : 0;
      const std::vector<ParamRecord>& r =
          kind == ParamMessageKind::kPush ? push : kind == ParamMessageKind::kRows ? rows : vocab;
      StatusOr<std::vector<std::string>> m = EncodeParamMessages(h, r);
      if (!m.ok() || m->size() != 1) {
        std::fprintf(stderr, "%s\n", m.ok() ? "not one message" : m.status().ToString().c_str());
        return 1;
      }
      // The fuzz target reads its expectations from a first byte: 0 = sgns, any dim.
      const std::string name = std::string(argv[1]) + "/" + ParamMessageKindName(kind) + "-" +
                               ParamPrecisionName(p) + ".bin";
      std::ofstream(name, std::ios::binary) << '\0' << m->front();
      ++written;
    }
  }
  ParamMessageHeader gap;
  gap.kind = ParamMessageKind::kGap;
  gap.dim = 4;
  gap.sender = 1;
  gap.sequence = 7;
  gap.sender_clock = 120;
  gap.base_clock = 131;
  StatusOr<std::vector<std::string>> m = EncodeParamMessages(gap, {});
  if (!m.ok() || m->size() != 1) {
    std::fprintf(stderr, "%s\n", m.ok() ? "not one message" : m.status().ToString().c_str());
    return 1;
  }
  std::ofstream(std::string(argv[1]) + "/gap.bin", std::ios::binary) << '\0' << m->front();
  ++written;
  std::printf("%d seeds in %s\n", written, argv[1]);
  return 0;
}
