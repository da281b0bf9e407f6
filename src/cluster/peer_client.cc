#include "cluster/peer_client.h"

#include <sys/mman.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "cluster/peer_auth.h"
#include "store/blob_builder.h"

namespace kc::cluster {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct Endpoint {
  std::string host;
  std::string port;
};

// "http://host:port" (the node URLs of the registry); anything else is refused.
StatusOr<Endpoint> EndpointOf(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return InvalidArgumentError("node URL " + url + ": only http:// between nodes for now");
  }
  std::string rest = url.substr(kScheme.size());
  if (size_t slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return Endpoint{rest, "80"};
  return Endpoint{rest.substr(0, colon), rest.substr(colon + 1)};
}

// A connected socket whose sends and receives give up after `timeout` each.
StatusOr<std::unique_ptr<tcp::socket>> Connect(net::io_context& io, const Endpoint& at,
                                               std::chrono::seconds timeout) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(at.host, at.port, ec);
  if (ec) return UnavailableError("resolving " + at.host + ": " + ec.message());
  auto socket = std::make_unique<tcp::socket>(io);
  net::connect(*socket, endpoints, ec);
  if (ec) return UnavailableError("connecting to " + at.host + ":" + at.port + ": " + ec.message());
  timeval tv{static_cast<time_t>(timeout.count()), 0};
  ::setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(socket->native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return socket;
}

// The blob's bytes, mapped (its memfd is sealed): sent without a copy.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) ::munmap(data, size);
  }
};

}  // namespace

StatusOr<store::BlobPtr> PeerClient::Fetch(const std::string& node_url,
                                           const std::string& sha256) const {
  KC_ASSIGN_OR_RETURN(Endpoint at, EndpointOf(node_url));
  net::io_context io;
  KC_ASSIGN_OR_RETURN(auto socket, Connect(io, at, timeout_));
  const std::string target = "/cluster/blobs/" + sha256;
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, at.host);
  request.set(kPeerHeader, SignPeerRequest(secret_, "GET", target, UnixSecondsNow()));
  boost::system::error_code ec;
  http::write(*socket, request, ec);
  if (ec)
    return UnavailableError("asking " + node_url + " for blob " + sha256 + ": " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  http::read_header(*socket, buffer, parser, ec);
  if (ec) return UnavailableError("reading " + node_url + "'s answer: " + ec.message());
  const int status = parser.get().result_int();
  if (status == 404) return NotFoundError(node_url + " does not have blob " + sha256);
  if (status != 200) {
    return UnavailableError(node_url + " answered " + std::to_string(status) + " for blob " +
                            sha256);
  }
  store::BlobBuilder builder;
  std::vector<char> chunk(size_t{1} << 20);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    http::read(*socket, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec)
      return UnavailableError("reading blob " + sha256 + " from " + node_url + ": " + ec.message());
    const std::string_view got(chunk.data(), chunk.size() - parser.get().body().size);
    builder.Hash(got);
    KC_RETURN_IF_ERROR(builder.Write(got));
  }
  if (std::string actual = builder.Digest(); actual != sha256) {
    return UnavailableError(node_url + " sent bytes hashing to " + actual + " for blob " + sha256);
  }
  return builder.Seal(sha256);
}

Status PeerClient::Push(const std::string& node_url, const store::BlobPtr& blob) const {
  KC_ASSIGN_OR_RETURN(Endpoint at, EndpointOf(node_url));
  Mapping bytes;
  bytes.size = blob->size();
  if (bytes.size > 0) {
    bytes.data = ::mmap(nullptr, bytes.size, PROT_READ, MAP_SHARED, blob->fd(), 0);
    if (bytes.data == MAP_FAILED) return InternalError("mapping a result to send it");
  }
  net::io_context io;
  KC_ASSIGN_OR_RETURN(auto socket, Connect(io, at, timeout_));
  const std::string target = "/cluster/blobs";
  http::request<http::buffer_body> request{http::verb::post, target, 11};
  request.set(http::field::host, at.host);
  request.set(http::field::content_type, "application/octet-stream");
  request.set("X-KCoral-Blob-SHA256", blob->sha256());
  request.set(kPeerHeader, SignPeerRequest(secret_, "POST", target, UnixSecondsNow()));
  request.body().data = bytes.size > 0 ? bytes.data : nullptr;
  request.body().size = bytes.size;
  request.body().more = false;
  request.content_length(bytes.size);
  boost::system::error_code ec;
  http::write(*socket, request, ec);
  if (ec) return UnavailableError("sending a result to " + node_url + ": " + ec.message());
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(*socket, buffer, response, ec);
  if (ec) return UnavailableError("reading " + node_url + "'s answer: " + ec.message());
  if (response.result_int() != 200) {
    return UnavailableError(node_url +
                            " refused a result: " + std::to_string(response.result_int()) + " " +
                            response.body().substr(0, 300));
  }
  return Status::Ok();
}

}  // namespace kc::cluster
