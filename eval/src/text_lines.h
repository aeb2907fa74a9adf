// Private helpers shared by the eval readers: whole-file reads and Python-style line splitting.
#ifndef STREAMVEC_EVAL_SRC_TEXT_LINES_H_
#define STREAMVEC_EVAL_SRC_TEXT_LINES_H_

#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec::eval::internal {

// The whole file. `what` names the kind of file in messages ("similarity file").
// Errors: NotFound, IoError, both naming the path.
StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what);

// Lines without their terminators, split like Python's universal newlines ("\n", "\r\n", "\r");
// no empty last line after a final terminator.
std::vector<std::string_view> SplitLines(std::string_view data);

// `s` without leading and trailing ASCII whitespace (what Python's str.strip() removes for ASCII).
std::string_view StripAscii(std::string_view s);

// Parses a number the way Python's float() does for ordinary input: surrounding whitespace,
// optional sign, decimal or exponent form, nan / inf. False for anything else.
bool ParsePythonFloat(std::string_view s, double* value);

}  // namespace streamvec::eval::internal

#endif  // STREAMVEC_EVAL_SRC_TEXT_LINES_H_
