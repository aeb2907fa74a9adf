// The REST server of `streamvec serve` (and of `streamvec run`, in-process): answers vector,
// neighbour and similarity queries from the newest published snapshot of a state directory, and
// swaps in newer snapshots while it serves. Routes and JSON bodies: api/README.md.
//
// Serving never waits for training: a background thread polls the state directory, copies a newer
// snapshot's embedding into memory, prepares it (unit rows for cosine), and only then swaps it in
// atomically. Each request holds the snapshot it started with until it finishes, so a swap never
// fails or mixes snapshots within a request.
//
// HTTP is cpprestsdk's listener (its shared thread pool). It has no limit on header size and no
// timeout on half-sent requests: a public deployment belongs behind a reverse proxy.
//
// Thread safety: all methods may be called from any thread. No process-wide state is owned, so
// several servers may run in one process (on different ports).
#ifndef STREAMVEC_API_SERVER_H_
#define STREAMVEC_API_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "streamvec/api/serving_snapshot.h"
#include "streamvec/base/status.h"

namespace streamvec::api {

struct ServeOptions {
  std::string state_dir;           // state directory a trainer writes (may not exist yet)
  std::string host = "127.0.0.1";  // address to listen on: IP literal or host name
  int port = 8000;                 // TCP port; 0 = pick a free port (see Server::port())
  double poll_interval_s = 0.5;    // seconds between checks for a newer snapshot; > 0
};

class Server {
 public:
  // Loads the newest published snapshot of options.state_dir if there is one (a missing one is
  // not an error: the server answers 503 until a snapshot appears), starts listening on
  // http://host:port/ and starts polling for newer snapshots. Returns once it accepts requests.
  // Errors: InvalidArgument naming the option (empty state_dir or host, port outside [0, 65535],
  // poll_interval_s not > 0); IoError naming host:port when it cannot listen (port in use,
  // address not local).
  static StatusOr<std::unique_ptr<Server>> Start(const ServeOptions& options);

  // The same, serving snapshots from `source` instead of options.state_dir (which is ignored):
  // for callers that publish snapshots in memory, and for tests.
  static StatusOr<std::unique_ptr<Server>> Start(const ServeOptions& options,
                                                 std::shared_ptr<SnapshotSource> source);

  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port listened on (the picked one when ServeOptions::port was 0).
  int port() const;
  // Version of the snapshot being served; 0 until the first one is loaded.
  uint64_t snapshot_version() const;
  // Stops accepting requests, waits for the polling thread, and closes the listener. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SERVER_H_
