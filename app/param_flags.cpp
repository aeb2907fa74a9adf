#include "param_flags.h"

#include <charconv>
#include <limits>
#include <system_error>

namespace streamvec::app {

void AddParamClientFlags(CLI::App* cmd, ParamClientFlags* flags, const std::string& lead) {
  cmd->add_option("--push-every", flags->push_every,
                  lead + "trained words between pushes (0: " + std::to_string(kGroupPushWords) +
                      " over the trainers sharing the topic's partitions, as this trainer's "
                      "share of them says: " +
                      std::to_string(kGroupPushWords / 2) + " for two, " +
                      std::to_string(kGroupPushWords / 4) + " for four; at least " +
                      std::to_string(kMinGroupPushWords) + ")")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--push-hot-rows", flags->push_hot_rows,
                  lead +
                      "the rows of this many most frequent words go out every push, rarer "
                      "rows every 2, 4, ... pushes (0: every moved row every push; auto: " +
                      std::to_string(kPushHotRows) + ", " + std::to_string(kPushHotRowsMany) +
                      " while " + std::to_string(kPushHotRowsManyFromTrainers) +
                      " or more trainers share the topic's partitions, as this trainer's share "
                      "of them says)")
      ->capture_default_str();
  cmd->add_option("--push-max-period", flags->push_max_period,
                  lead +
                      "pushes between two of a rare row at most (rounded down to a power of "
                      "two)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--pull-every", flags->pull_every,
                  lead +
                      "trained words between applications of the rows the shards published "
                      "(read all the while; the newest row of each word waits; 0: after "
                      "every document, or piece of a long one)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-staleness", flags->max_staleness,
                  lead +
                      "push rounds of this trainer that a shard may not have merged when the "
                      "next goes out; the trainer waits for the shards (bounded delay; 0: "
                      "each push merged before the next; -1: no bound)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max())
                  .description("-1 OR NONNEGATIVE"))
      ->capture_default_str();
  cmd->add_option("--delta-precision", flags->delta_precision,
                  lead +
                      "fp32 or fp16 (half the bytes; the rounding is carried into the next "
                      "push)")
      ->capture_default_str();
  cmd->add_option("--group-counts", flags->group_counts,
                  lead +
                      "auto, on or off: admit words and weigh the noise distribution by the "
                      "whole group's counts as the shards publish them (off: by this trainer's "
                      "own; auto: on while " +
                      std::to_string(kGroupCountsMinTrainers) +
                      " or more trainers share the topic's partitions, as this trainer's share "
                      "of them says)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

Status ApplyParamClientFlags(const ParamClientFlags& f, KafkaTrainerOptions* o) {
  o->push_every_words = f.push_every;
  if (f.push_hot_rows == "auto") {
    o->push_hot_rows.reset();
  } else {
    uint32_t rows = 0;
    const char* end = f.push_hot_rows.data() + f.push_hot_rows.size();
    auto [p, ec] = std::from_chars(f.push_hot_rows.data(), end, rows);
    if (f.push_hot_rows.empty() || ec != std::errc() || p != end) {
      return Status::InvalidArgument(
          "--push-hot-rows must be auto or a number of rows from 0 to 4294967295, not '" +
          f.push_hot_rows + "'");
    }
    o->push_hot_rows = rows;
  }
  o->push_max_period = f.push_max_period;
  o->pull_every_words = static_cast<uint64_t>(f.pull_every);
  o->max_staleness = f.max_staleness;
  StatusOr<ParamPrecision> p = ParseParamPrecision(f.delta_precision);
  if (!p.ok()) return Status::InvalidArgument("--delta-precision: " + p.status().message());
  o->delta_precision = *p;
  if (f.group_counts == "auto") {
    o->group_counts = KafkaTrainerOptions::GroupCounts::kAuto;
  } else if (f.group_counts == "on") {
    o->group_counts = KafkaTrainerOptions::GroupCounts::kOn;
  } else if (f.group_counts == "off") {
    o->group_counts = KafkaTrainerOptions::GroupCounts::kOff;
  } else {
    return Status::InvalidArgument("--group-counts must be auto, on or off, not '" +
                                   f.group_counts + "'");
  }
  return Status::Ok();
}

}  // namespace streamvec::app
