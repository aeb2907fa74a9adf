#include "../../trainer/src/filtered_word_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace streamvec {
namespace {

TEST(FilteredWordMapTest, HoldsAtMostItsCapacityAndFindsWhatItHolds) {
  FilteredWordMap<double> m;
  m.set_capacity(2);
  EXPECT_EQ(m.Find("cat"), nullptr);
  double* cat = m.FindOrAdd("cat");
  ASSERT_NE(cat, nullptr);
  EXPECT_EQ(*cat, 0.0);  // value-initialised
  *cat = 3.0;
  ASSERT_NE(m.FindOrAdd("dog"), nullptr);
  EXPECT_EQ(m.FindOrAdd("owl"), nullptr);  // full: not added
  EXPECT_EQ(m.Find("owl"), nullptr);
  EXPECT_EQ(m.size(), 2u);
  ASSERT_NE(m.FindOrAdd("cat"), nullptr);  // held words are still found when full
  EXPECT_EQ(*m.Find("cat"), 3.0);

  m.Erase("cat");
  m.Erase("never-added");
  EXPECT_EQ(m.Find("cat"), nullptr);
  EXPECT_EQ(m.size(), 1u);
  ASSERT_NE(m.FindOrAdd("owl"), nullptr);  // room again
  m.Clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.Find("dog"), nullptr);
  EXPECT_EQ(m.Find("owl"), nullptr);
}

// Words come and go many times over the filter's rebuild threshold (twice the map's size, at
// least 4096 adds): what is held is always found, what left never is.
TEST(FilteredWordMapTest, ChurnPastTheFilterRebuildsKeepsLookUpsExact) {
  FilteredWordMap<std::vector<float>> m;
  m.set_capacity(100);
  const auto word = [](int i) { return "w" + std::to_string(i); };
  for (int i = 0; i < 20000; ++i) {
    std::vector<float>* v = m.FindOrAdd(word(i));
    ASSERT_NE(v, nullptr) << i;
    v->assign(2, static_cast<float>(i));
    if (i >= 50) m.Erase(word(i - 50));  // at most 50 held
  }
  EXPECT_EQ(m.size(), 50u);
  for (int i = 0; i < 20000; ++i) {
    const std::vector<float>* v = m.Find(word(i));
    if (i < 20000 - 50) {
      EXPECT_EQ(v, nullptr) << i;
    } else {
      ASSERT_NE(v, nullptr) << i;
      EXPECT_EQ((*v)[0], static_cast<float>(i));
    }
  }
}

}  // namespace
}  // namespace streamvec
