#include "hash.h"

#include <libxml/parser.h>
#include <openssl/evp.h>

#include <mutex>

namespace streamvec::crawler::internal {

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

namespace {
void Silent(void*, const char*, ...) {}
}  // namespace

void InitLibXml() {
  static std::once_flag once;
  std::call_once(once, [] { xmlInitParser(); });
  // libxml2 reports encoding-conversion failures through the generic handler (thread-local),
  // ignoring XML_PARSE_NOERROR; our callers get the error from the parser context instead.
  thread_local bool silenced = false;
  if (!silenced) {
    xmlSetGenericErrorFunc(nullptr, &Silent);
    silenced = true;
  }
}

}  // namespace streamvec::crawler::internal
