// Replies an HTTP listener has handed to cpprestsdk and that are not written yet (private to
// api/), so that a listener is closed only once they are: a graceful stop for the clients, and
// a way around a race in cpprestsdk's asio listener (2.10.18). Its close()
// (hostport_listener::stop) shuts every connection's socket from the closing thread, while a
// pool thread that has just written a reply may still be re-arming that same socket's read for
// the next keep-alive request; asio sockets are not safe for that, and the test binaries crashed
// (rarely) in exactly that place: a request answered, then the server stopped.
#ifndef STREAMVEC_API_SRC_REPLIES_IN_FLIGHT_H_
#define STREAMVEC_API_SRC_REPLIES_IN_FLIGHT_H_

#include <cpprest/http_listener.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace streamvec::api {

// Requests a listener's handler has taken and whose replies cpprestsdk has not written yet. A
// request costs two atomic updates; only closing waits.
class RepliesInFlight {
  using Count = std::atomic<int>;

 public:
  // One request, counted from Take() until its reply is written (or fails to be: a client that
  // went away; that failure is observed here, or pplx terminates) or, never replied, until the
  // ticket is destroyed.
  class Ticket {
   public:
    explicit Ticket(std::shared_ptr<Count> count) : count_(std::move(count)) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      if (count_ != nullptr) --*count_;
    }
    // Sends `response` to `request`'s client. Throws what http_request::reply throws.
    void Reply(web::http::http_request& request, const web::http::http_response& response) {
      pplx::task<void> sent = request.reply(response);
      // The continuation holds the count: it may run after the RepliesInFlight is gone.
      sent.then([count = std::move(count_)](pplx::task<void> t) {
        try {
          t.get();
        } catch (...) {
        }
        --*count;
      });
    }

   private:
    std::shared_ptr<Count> count_;
  };

  // Counts a request its handler has just taken.
  Ticket Take() {
    ++*count_;
    return Ticket(count_);
  }

  // Closes `listener` once the requests taken are answered and their replies written (waiting
  // at most `wait`), plus `settle` for the threads that wrote them to re-arm their connections'
  // reads. Requests arriving meanwhile are still answered; any still unanswered when it closes
  // get cpprestsdk's 500. `what` names the listener in the warning logged when closing fails.
  void CloseAfterDraining(web::http::experimental::listener::http_listener& listener,
                          const std::string& what,
                          std::chrono::milliseconds wait = std::chrono::seconds(2),
                          std::chrono::milliseconds settle = std::chrono::milliseconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (count_->load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(settle);
    try {
      listener.close().wait();
    } catch (const std::exception& e) {
      spdlog::warn("{}: closing the listener: {}", what, e.what());
    }
  }

 private:
  std::shared_ptr<Count> count_ = std::make_shared<Count>(0);
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_REPLIES_IN_FLIGHT_H_
