// Word lists as the character model takes them (tests/charmodel).
#ifndef STREAMVEC_TESTS_CHARMODEL_WORD_VIEWS_H_
#define STREAMVEC_TESTS_CHARMODEL_WORD_VIEWS_H_

#include <string>
#include <string_view>
#include <vector>

namespace streamvec::testing {

// Views of `words`, in order; valid while `words` is.
inline std::vector<std::string_view> Views(const std::vector<std::string>& words) {
  return std::vector<std::string_view>(words.begin(), words.end());
}

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_CHARMODEL_WORD_VIEWS_H_
