// WordSlotIndex: lookups after inserts and backward-shift erases, through growth and through
// probe runs of colliding hashes, against a reference map.
#include "streamvec/base/word_slot_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "streamvec/base/hash_word.h"

namespace streamvec {
namespace {

// Grown from nothing (a parameter node's rows) to 20,000 words, half erased at random, refilled:
// every held word is found at its slot, every other is not.
TEST(WordSlotIndexTest, FindsEveryHeldWordThroughGrowthAndErases) {
  WordSlotIndex index;
  index.Init(0);
  std::vector<std::string> words;
  std::map<std::string, uint32_t> held;
  auto add = [&](const std::string& w) {
    const uint32_t slot = static_cast<uint32_t>(words.size());
    words.push_back(w);
    index.Insert(HashWord(w), slot);
    held[w] = slot;
  };
  for (int i = 0; i < 20000; ++i) add("w" + std::to_string(i));
  EXPECT_EQ(index.size(), 20000u);
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    if (rng() % 2 == 0) continue;
    const std::string w = "w" + std::to_string(i);
    index.Erase(HashWord(w), held.at(w));
    held.erase(w);
  }
  for (int i = 20000; i < 25000; ++i) add("w" + std::to_string(i));
  EXPECT_EQ(index.size(), held.size());
  for (int i = 0; i < 25000; ++i) {
    const std::string w = "w" + std::to_string(i);
    const auto it = held.find(w);
    EXPECT_EQ(index.Find(w, HashWord(w), words),
              it == held.end() ? WordSlotIndex::kNone : it->second)
        << w;
  }
  EXPECT_EQ(index.Find("absent", HashWord("absent"), words), WordSlotIndex::kNone);
}

// Words whose hashes share their low bits fill one probe run; erasing from its middle keeps the
// rest reachable, and growing moves the run intact.
TEST(WordSlotIndexTest, CollidingHashesStayReachableAfterEraseAndGrowth) {
  WordSlotIndex index;
  index.Init(4);  // 16 buckets
  const std::vector<std::string> words = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  auto hash = [](uint32_t i) { return (uint64_t{i} << 32) | (i < 5 ? 5u : 6u); };
  for (uint32_t i = 0; i < 5; ++i) index.Insert(hash(i), i);
  index.Erase(hash(1), 1);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(index.Find(words[i], hash(i), words), i == 1 ? WordSlotIndex::kNone : i) << i;
  }
  for (uint32_t i = 5; i < 10; ++i) index.Insert(hash(i), i);  // the 9th entry: 32 buckets
  index.Insert(hash(1), 1);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(index.Find(words[i], hash(i), words), i) << i;
  EXPECT_EQ(index.size(), 10u);
  EXPECT_EQ(index.MemoryBytes(), 32 * 8u);
}

}  // namespace
}  // namespace streamvec
