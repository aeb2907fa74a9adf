// streamvec serve --state DIR --http HOST:PORT [--poll-interval S]: the REST API over a state
// directory's published snapshots (api/README.md), until SIGINT or SIGTERM.
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "commands.h"
#include "streamvec/api/server.h"

namespace streamvec::app {
namespace {

struct ServeFlags {
  std::string state;
  std::string http = "127.0.0.1:8000";
  double poll_interval_s = 0.5;
};

// "HOST:PORT" or "[IPv6]:PORT", PORT in [0, 65535] (0 = pick a free one).
bool ParseHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  const std::string p = text.substr(colon + 1);
  int value = -1;
  const auto r = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || r.ec != std::errc() || r.ptr != p.data() + p.size() || value < 0 ||
      value > 65535) {
    return false;
  }
  *host = h;
  *port = value;
  return true;
}

int RunServe(const ServeFlags& flags) {
  api::ServeOptions options;
  options.state_dir = flags.state;
  options.poll_interval_s = flags.poll_interval_s;
  if (!ParseHostPort(flags.http, &options.host, &options.port)) {
    std::fprintf(stderr,
                 "streamvec serve: --http: expected HOST:PORT (e.g. 127.0.0.1:8000), got '%s'\n",
                 flags.http.c_str());
    return 2;
  }
  if (!(flags.poll_interval_s > 0)) {
    std::fprintf(stderr, "streamvec serve: --poll-interval: must be > 0 seconds\n");
    return 2;
  }
  // Block the stop signals before any thread starts, so every thread inherits the mask and this
  // one receives them with sigtimedwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  StatusOr<std::unique_ptr<api::Server>> server = api::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "streamvec serve: %s\n", server.status().ToString().c_str());
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string host =
      options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  const std::string url = "http://" + host + ":" + std::to_string((*server)->port());
  bool announced = false;
  if ((*server)->snapshot_version() == 0) {
    std::printf("listening on %s: waiting for a first snapshot in %s\n", url.c_str(),
                flags.state.c_str());
    std::fflush(stdout);
  }
  while (true) {
    if (!announced && (*server)->snapshot_version() > 0) {
      std::printf("serving %s (snapshot %llu)\n", url.c_str(),
                  static_cast<unsigned long long>((*server)->snapshot_version()));
      std::fflush(stdout);
      announced = true;
    }
    const timespec wait = {0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&stop, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  (*server)->Stop();
  std::fprintf(stderr, "streamvec serve: stopped\n");
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = root.add_subcommand(
      "serve",
      "Serve vectors, neighbours and similarities over HTTP from a state directory's "
      "newest snapshot (hot-swapped as a trainer publishes)");
  cmd->add_option("--state", flags->state, "State directory a trainer writes (may not exist yet)")
      ->required();
  cmd->add_option("--http", flags->http, "HOST:PORT to listen on (PORT 0 picks a free one)")
      ->capture_default_str();
  cmd->add_option("--poll-interval", flags->poll_interval_s,
                  "Seconds between checks for a newer snapshot")
      ->capture_default_str();
  cmd->callback([flags, exit_code]() { *exit_code = RunServe(*flags); });
}

}  // namespace streamvec::app
