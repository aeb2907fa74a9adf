// The --metrics HOST:PORT endpoint of the processes that do not serve the REST API, on a real
// socket.
#include "streamvec/api/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

TEST(MetricsEndpointTest, ServesTheTextAtMetricsAndJsonErrorsElsewhere) {
  std::atomic<int> scrapes{0};
  StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start("127.0.0.1", 0, [&scrapes]() {
        return "# TYPE streamvec_test_scrapes_total counter\nstreamvec_test_scrapes_total " +
               std::to_string(++scrapes) + "\n";
      });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  ASSERT_GT((*endpoint)->port(), 0);
  Client client((*endpoint)->port());

  http::http_response r = client.Raw(http::methods::GET, "/metrics");
  EXPECT_EQ(r.status_code(), 200);
  EXPECT_EQ(r.headers().content_type(), "text/plain; version=0.0.4; charset=utf-8");
  std::string text = r.extract_utf8string(true).get();
  EXPECT_NE(text.find("streamvec_test_scrapes_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE streamvec_process_start_time_seconds gauge"), std::string::npos);
  text = client.Raw(http::methods::GET, "/metrics").extract_utf8string(true).get();
  EXPECT_NE(text.find("streamvec_test_scrapes_total 2\n"), std::string::npos);  // fresh per GET

  Reply other = client.Get("/v1/vectors/the");
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.value("error", "").find("GET /metrics"), std::string::npos);
  other = client.Call(http::methods::POST, "/metrics", "{}", true);
  EXPECT_EQ(other.status, 405);
  // cpprestsdk would answer TRACE itself, echoing the request's headers.
  r = client.Raw(http::methods::TRCE, "/metrics", "Bearer secret");
  EXPECT_EQ(r.status_code(), 405);
  EXPECT_EQ(r.extract_utf8string(true).get().find("secret"), std::string::npos);
  EXPECT_EQ(scrapes.load(), 2);
}

TEST(MetricsEndpointTest, RefusesAnEmptyHostAndAPortInUse) {
  EXPECT_EQ(MetricsEndpoint::Start("", 0, [] { return std::string(); }).status().code(),
            StatusCode::kInvalidArgument);
  // A port another socket listens on (as another process would).
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  StatusOr<std::unique_ptr<MetricsEndpoint>> second =
      MetricsEndpoint::Start("127.0.0.1", ntohs(addr.sin_port), [] { return std::string(); });
  ::close(fd);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIoError);
  EXPECT_NE(second.status().message().find("--metrics"), std::string::npos);
}

}  // namespace
}  // namespace streamvec::api
