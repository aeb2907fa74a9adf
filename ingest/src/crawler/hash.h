// Content hashing for item ids and dedup (private).
#ifndef STREAMVEC_INGEST_SRC_CRAWLER_HASH_H_
#define STREAMVEC_INGEST_SRC_CRAWLER_HASH_H_

#include <string>
#include <string_view>

namespace streamvec::crawler::internal {

// SHA-256 of `data` as 64 lower-case hex digits (OpenSSL).
std::string Sha256Hex(std::string_view data);

// Initialises libxml2 once per process (thread-safe) and silences its generic error output on the
// calling thread (errors are read from parser contexts instead). Call before each parse.
void InitLibXml();

}  // namespace streamvec::crawler::internal

#endif  // STREAMVEC_INGEST_SRC_CRAWLER_HASH_H_
