// Writing Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): what GET /metrics is made of,
// and what an embedding process (`streamvec run`) uses for ServeOptions::extra_metrics.
#ifndef STREAMVEC_API_PROMETHEUS_H_
#define STREAMVEC_API_PROMETHEUS_H_

#include <string>
#include <string_view>

namespace streamvec::api {

// Appends the "# HELP" and "# TYPE" lines of a metric family; type is "gauge", "counter" or
// "histogram". Samples of the family follow (one per label set).
void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help);

// Appends the family's HELP and TYPE lines and one sample, `name{labels} value`; `labels` is
// `key="value",...` with values already escaped (EscapeLabel), or empty for none.
void AppendMetric(std::string* out, std::string_view name, std::string_view type,
                  std::string_view help, double value, std::string_view labels = "");

// A label value escaped for the text format (backslash, double quote, newline).
std::string EscapeLabel(std::string_view value);

// A number as Prometheus reads it: shortest round-trip decimal; NaN, +Inf, -Inf spelled its way.
std::string PromNumber(double v);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_PROMETHEUS_H_
