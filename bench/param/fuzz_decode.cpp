// libFuzzer target: DecodeParamMessage on arbitrary bytes, with the expectations the first byte
// picks (any dim or dim 4, sgns or char-lstm). It must never crash or read out of bounds, and a
// message it accepts must be canonical: encoding the decoded message again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/param/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  streamvec::ParamExpectations expect;
  expect.dim = (data[0] & 1) ? 4 : 0;
  expect.model = (data[0] & 2) ? streamvec::ParamModelKind::kCharLstm
                               : streamvec::ParamModelKind::kSgns;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  streamvec::StatusOr<streamvec::ParamMessage> m = streamvec::DecodeParamMessage(bytes, expect);
  if (!m.ok()) {
    if (m.status().message().empty()) std::abort();  // every rejection names its reason
    return 0;
  }
  if (m->records.size() != m->header.record_count) std::abort();
  if (m->records.empty()) return 0;  // the encoder writes no message for no records
  streamvec::StatusOr<std::vector<std::string>> again = streamvec::EncodeParamMessages(
      m->header, m->records, bytes.size());
  if (!again.ok() || again->size() != 1 || (*again)[0] != bytes) std::abort();
  return 0;
}
