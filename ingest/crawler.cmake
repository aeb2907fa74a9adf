# The feed crawler (streamvec crawl / extract): feeds (RSS/Atom) and article pages into
# <prefix>.docs, with politeness, safety checks and dedup state in RocksDB. See docs/crawler.md.
find_package(LibXml2 REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)  # SHA-256 of item content (dedup)

# The parsers alone (no network, no Kafka, no RocksDB): what the fuzz targets and the extraction
# benchmark build on.
add_library(streamvec_crawler_parse STATIC
  src/crawler/encoding.cpp
  src/crawler/text_builder.cpp
  src/crawler/hash.cpp
  src/crawler/feed_parser.cpp
  src/crawler/extract.cpp
  src/crawler/robots.cpp)
target_include_directories(streamvec_crawler_parse PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(streamvec_crawler_parse
  PUBLIC streamvec::base
  PRIVATE streamvec::tokenizer LibXml2::LibXml2 OpenSSL::Crypto)
streamvec_warnings(streamvec_crawler_parse)

add_library(streamvec_crawler
  src/crawler/fetcher.cpp
  src/crawler/crawl_state.cpp
  src/crawler/crawler.cpp)
add_library(streamvec::crawler ALIAS streamvec_crawler)
target_include_directories(streamvec_crawler PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(streamvec_crawler
  PUBLIC streamvec::kafka streamvec::base streamvec_crawler_parse
  PRIVATE streamvec::ingest LibXml2::LibXml2 CURL::libcurl RocksDB::rocksdb-shared
          nlohmann_json::nlohmann_json spdlog::spdlog Threads::Threads)
streamvec_warnings(streamvec_crawler)
