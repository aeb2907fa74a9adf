// `streamvec state verify|repair`: checks every snapshot of a state directory, and makes a
// damaged one resumable again from its newest intact snapshot (store/state_check.h).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "streamvec/store/state_check.h"

namespace streamvec::app {
namespace {

// Exit codes (docs/operations.md, "A damaged state").
constexpr int kIntact = 0;    // verify: all intact; repair: resumable (repaired or not needed)
constexpr int kDamaged = 1;   // verify: something is damaged; repair: nothing intact to
                              // restore from, or a file-system error
constexpr int kBadState = 2;  // no state at --state, or (repair) a running process holds it

int Fail(const char* command, const Status& status, int code) {
  std::fprintf(stderr, "streamvec state %s: error: %s\n", command, status.message().c_str());
  return code;
}

void PrintPart(const char* what, const PartHealth& p) {
  const std::string version = p.version > 0 ? std::to_string(p.version) : "-";
  if (p.status.ok()) {
    std::printf("%-9s %-8s intact    %s\n", what, version.c_str(), p.path.c_str());
  } else {
    std::printf("%-9s %-8s DAMAGED   %s\n", what, version.c_str(), p.status.message().c_str());
  }
}

int RunVerify(const std::string& state) {
  StatusOr<StateHealth> health = VerifyState(state);
  if (!health.ok()) {
    const int code = health.status().code() == StatusCode::kNotFound ? kBadState : kDamaged;
    return Fail("verify", Status(health.status().code(), "--state: " + health.status().message()),
                code);
  }
  std::printf("%-9s %-8s %-9s %s\n", "part", "snapshot", "state", "path or damage");
  if (health->live_checked) {
    PrintPart("live", health->live);
  } else {
    std::printf("%-9s %-8s %-9s %s\n", "live", "-", "in use", "not checked: a process holds it");
  }
  uint64_t newest_intact = 0;
  size_t intact = 0;
  for (const PartHealth& c : health->checkpoints) {
    PrintPart("snapshot", c);
    if (c.status.ok()) {
      ++intact;
      newest_intact = c.version;
    }
  }
  std::printf("%zu of %zu published snapshots intact", intact, health->checkpoints.size());
  if (intact > 0) std::printf("; newest intact: %llu", (unsigned long long)newest_intact);
  std::printf("\n");
  if (health->intact()) return kIntact;
  std::printf("damaged: `streamvec state repair --state %s` moves the damaged parts aside%s\n",
              state.c_str(),
              health->live_checked && !health->live.status.ok()
                  ? " and rebuilds the live database from the newest intact snapshot"
                  : "");
  return kDamaged;
}

int RunRepair(const std::string& state) {
  StatusOr<StateRepair> repair = RepairState(state);
  if (!repair.ok()) {
    const StatusCode c = repair.status().code();
    const int code =
        c == StatusCode::kNotFound || c == StatusCode::kFailedPrecondition ? kBadState : kDamaged;
    return Fail("repair", Status(c, "--state: " + repair.status().message()), code);
  }
  for (const std::string& a : repair->actions) std::printf("%s\n", a.c_str());
  if (repair->actions.empty()) std::printf("nothing damaged\n");
  std::printf("a writer on %s resumes from snapshot %llu\n", state.c_str(),
              (unsigned long long)repair->version);
  return kIntact;
}

}  // namespace

void RegisterStateCommand(CLI::App& root, int* exit_code) {
  CLI::App* cmd = root.add_subcommand(
      "state",
      "Check a state directory's snapshots (verify) or make a damaged one resumable "
      "from its newest intact snapshot (repair)");
  cmd->require_subcommand(1);
  auto verify_state = std::make_shared<std::string>();
  CLI::App* verify = cmd->add_subcommand(
      "verify",
      "Read every byte of the live database and of each published snapshot (RocksDB block "
      "checksums, the snapshot manifest's sizes and XXH3-128 hashes, the metadata) and say which "
      "are intact. Exit 0: all intact; 1: something is damaged; 2: no state at --state");
  verify->add_option("--state", *verify_state, "State directory (train, run, param-node)")
      ->required();
  verify->callback([verify_state, exit_code] { *exit_code = RunVerify(*verify_state); });
  auto repair_state = std::make_shared<std::string>();
  CLI::App* repair = cmd->add_subcommand(
      "repair",
      "Move damaged snapshots aside and, when the live database is damaged, rebuild it from the "
      "newest intact snapshot, so that a restart resumes from it (with its offsets). Nothing is "
      "deleted: damaged parts go to <state>/damaged/<time>/. Stop the process using the state "
      "first. Exit 0: resumable; 1: nothing intact to restore from (nothing changed); 2: no state "
      "at --state, or a process holds it");
  repair->add_option("--state", *repair_state, "State directory (train, run, param-node)")
      ->required();
  repair->callback([repair_state, exit_code] { *exit_code = RunRepair(*repair_state); });
}

}  // namespace streamvec::app
