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

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace streamvec::api {

// Requests a listener's handler has taken and whose replies cpprestsdk has not written yet.
class RepliesInFlight {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int count = 0;  // GUARDED_BY(mu)
    void Done() {
      std::lock_guard<std::mutex> lock(mu);
      if (--count == 0) cv.notify_all();
    }
  };

 public:
  // One request, counted from Take() until its reply is written (or fails to be: a client that
  // went away; that failure is observed here, or pplx terminates) or, never replied, until the
  // ticket is destroyed.
  class Ticket {
   public:
    explicit Ticket(std::shared_ptr<State> state) : state_(std::move(state)) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      if (state_ != nullptr) state_->Done();
    }
    // Sends `response` to `request`'s client. Throws what http_request::reply throws.
    void Reply(web::http::http_request& request, const web::http::http_response& response) {
      pplx::task<void> sent = request.reply(response);
      std::shared_ptr<State> state = std::move(state_);  // also outlives the RepliesInFlight
      sent.then([state](pplx::task<void> t) {
        try {
          t.get();
        } catch (...) {
        }
        state->Done();
      });
    }

   private:
    std::shared_ptr<State> state_;
  };

  // Counts a request its handler has just taken.
  Ticket Take() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      ++state_->count;
    }
    return Ticket(state_);
  }

  // Closes `listener` once the requests taken are answered and their replies written (waiting
  // at most `wait`), plus `settle` for the threads that wrote them to re-arm their connections'
  // reads. Requests arriving meanwhile are still answered; any still unanswered when it closes
  // get cpprestsdk's 500. `what` names the listener in the warning logged when closing fails.
  void CloseAfterDraining(web::http::experimental::listener::http_listener& listener,
                          const std::string& what,
                          std::chrono::milliseconds wait = std::chrono::seconds(2),
                          std::chrono::milliseconds settle = std::chrono::milliseconds(5)) {
    {
      std::unique_lock<std::mutex> lock(state_->mu);
      state_->cv.wait_for(lock, wait, [this] { return state_->count == 0; });
    }
    std::this_thread::sleep_for(settle);
    try {
      listener.close().wait();
    } catch (const std::exception& e) {
      spdlog::warn("{}: closing the listener: {}", what, e.what());
    }
  }

 private:
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_REPLIES_IN_FLIGHT_H_
