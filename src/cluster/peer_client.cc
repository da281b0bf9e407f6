#include "cluster/peer_client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/memfd.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "cluster/http_endpoint.h"
#include "cluster/peer_auth.h"
#include "store/blob.h"
#include "tls/client_context.h"

namespace kc::cluster {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr auto kCloseNotifyWait = std::chrono::seconds(5);
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;  // a blob's body is read by this much

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection to a peer, plain or TLS, run on an event loop of its own: each step is
// started and the loop run until it ends, so Beast's timeouts apply to blocking calls.
class Connection {
 public:
  Connection(const HttpEndpoint& at, boost::asio::ssl::context* tls, std::chrono::seconds timeout)
      : at_(at), timeout_(timeout) {
    if (at.https) {
      tls_.emplace(io_, *tls);
    } else {
      plain_.emplace(io_);
    }
  }

  // Calls fn with the stream this connection has.
  template <class Fn>
  decltype(auto) Visit(Fn fn) {
    return tls_ ? fn(*tls_) : fn(*plain_);
  }

  Status Open() {
    error_code ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(at_.host, at_.port, ec);
    if (ec) return UnavailableError("resolving " + at_.host + ": " + ec.message());
    auto& tcp_stream = Visit([](auto& s) -> PlainStream& { return beast::get_lowest_layer(s); });
    ec = Step(tcp_stream, [&](auto handler) {
      tcp_stream.async_connect(
          endpoints, [handler](error_code ec, const tcp::endpoint&) mutable { handler(ec, 0); });
    });
    if (ec) return UnavailableError("connecting to " + Where() + ": " + ec.message());
    if (tls_) return Handshake(*tls_);
    return Status::Ok();
  }

  template <class Message>
  error_code Write(Message& message) {
    http::serializer<Message::is_request::value, typename Message::body_type> serializer(message);
    error_code result;
    Visit([&](auto& stream) { WriteFrom(stream, serializer, result); });
    io_.restart();
    io_.run();
    return result;
  }

  // Reads the header, or as much of the body as the parser's buffer takes.
  template <class Parser>
  error_code Read(beast::flat_buffer& buffer, Parser& parser, bool header_only = false) {
    return Visit([&](auto& stream) {
      return Step(stream, [&](auto handler) {
        if (header_only) {
          http::async_read_header(stream, buffer, parser, std::move(handler));
        } else {
          http::async_read(stream, buffer, parser, std::move(handler));
        }
      });
    });
  }

  // Reads exactly `into`'s size from the stream itself (no parser, no copy through a buffer):
  // a blob's body, straight into the chunk it is hashed and stored from.
  error_code ReadExactly(net::mutable_buffer into) {
    return Visit([&](auto& stream) {
      return Step(stream, [&](auto handler) { net::async_read(stream, into, std::move(handler)); });
    });
  }

  // TLS: says close_notify and waits a little for the peer's (docs/tls.md: the server answers
  // with its own), so neither side logs a truncated stream.
  ~Connection() {
    if (tls_ && handshaken_) {
      beast::get_lowest_layer(*tls_).expires_after(kCloseNotifyWait);
      tls_->async_shutdown([](error_code) {});
      io_.restart();
      io_.run();
    }
  }

  std::string Where() const { return at_.HostHeader(); }

 private:
  // Runs one operation to its end under the timeout.
  template <class Stream, class Start>
  error_code Step(Stream& stream, Start start) {
    beast::get_lowest_layer(stream).expires_after(timeout_);
    error_code result = net::error::would_block;
    start([&result](error_code ec, std::size_t) { result = ec; });
    io_.restart();
    io_.run();
    return result;
  }

  // Writes in steps, each under the timeout: an idle timeout, so a large body on a slow link
  // is not cut off for its size.
  template <class Stream, class Serializer>
  void WriteFrom(Stream& stream, Serializer& serializer, error_code& result) {
    beast::get_lowest_layer(stream).expires_after(timeout_);
    http::async_write_some(stream, serializer, [&](error_code ec, std::size_t) {
      if (ec || serializer.is_done()) {
        result = ec;
        return;
      }
      WriteFrom(stream, serializer, result);
    });
  }

  Status Handshake(TlsStream& tls) {
    KC_RETURN_IF_ERROR(tls::ExpectPeerName(tls.native_handle(), at_.host));
    error_code ec = Step(tls, [&](auto handler) {
      tls.async_handshake(net::ssl::stream_base::client,
                          [handler](error_code ec) mutable { handler(ec, 0); });
    });
    if (!ec) {
      handshaken_ = true;
      return Status::Ok();
    }
    std::string why = ec.message();
    if (const long verify = ::SSL_get_verify_result(tls.native_handle()); verify != X509_V_OK) {
      why += ": " + std::string(::X509_verify_cert_error_string(verify));
    }
    return UnavailableError("TLS handshake with " + Where() + " failed: " + why);
  }

  const HttpEndpoint at_;
  const std::chrono::seconds timeout_;
  net::io_context io_{1};             // before the stream, which uses it
  std::optional<PlainStream> plain_;  // one of the two
  std::optional<TlsStream> tls_;
  bool handshaken_ = false;
};

StatusOr<std::unique_ptr<Connection>> Connect(const std::string& node_url,
                                              boost::asio::ssl::context* tls,
                                              std::chrono::seconds timeout) {
  KC_ASSIGN_OR_RETURN(HttpEndpoint at, ParseHttpEndpoint(node_url));
  if (at.https && tls == nullptr) {
    return UnavailableError("node " + node_url +
                            " speaks HTTPS, and this node has no --cluster-peer-ca to check it");
  }
  auto connection = std::make_unique<Connection>(at, tls, timeout);
  KC_RETURN_IF_ERROR(connection->Open());
  return connection;
}

// A memfd's bytes, mapped: a blob's to send without a copy, or to read a fetched one into.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  Mapping() = default;
  Mapping(Mapping&& other) noexcept
      : data(std::exchange(other.data, MAP_FAILED)), size(other.size) {}
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() { Unmap(); }
  void Unmap() {
    if (data != MAP_FAILED) ::munmap(data, size);
    data = MAP_FAILED;
  }
};

// A fetched blob's memfd, sized up front and mapped writable: the body is read from the socket
// straight into it, so its bytes are copied once. Reading into a buffer and writing that into
// the memfd (BlobBuilder) cost a second copy, which on the 16-core GPU machine made the store
// the fetch's slowest stage (256 MiB: 400 ms against 212 ms for the bare transfer).
class BlobFile {
 public:
  static StatusOr<BlobFile> Make(uint64_t size) {
    BlobFile file;
    KC_ASSIGN_OR_RETURN(file.fd_, MakeMemfd(store::kBlobMemfdName));
    if (::ftruncate(file.fd_.get(), static_cast<off_t>(size)) != 0) {
      return InternalError("sizing a memfd of " + std::to_string(size) + " bytes for a blob");
    }
    file.mapping_.size = size;
    if (size > 0) {
      file.mapping_.data =
          ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd_.get(), 0);
      if (file.mapping_.data == MAP_FAILED) return InternalError("mapping a blob's memfd");
    }
    return file;
  }
  int fd() const { return fd_.get(); }
  char* bytes() { return static_cast<char*>(mapping_.data); }
  uint64_t size() const { return mapping_.size; }
  // Unmaps (a sealed memfd may have no writable mapping) and seals it into the blob.
  StatusOr<store::BlobPtr> Seal(std::string sha256) && {
    mapping_.Unmap();
    KC_RETURN_IF_ERROR(SealMemfd(fd_.get()));
    return store::Blob::FromSealedMemfd(std::move(sha256), mapping_.size, std::move(fd_));
  }

 private:
  UniqueFd fd_;
  Mapping mapping_;
};

// Reads the rest of `file` from `connection`, from byte `from` on, and hashes it all. The hash
// follows the reads a chunk behind on a thread of its own, so the fetch costs about the longer
// of the transfer and the hash pass, not their sum. Another thread allocates the memfd's pages a
// chunk ahead of the reads (fallocate mode 0 leaves bytes already there alone), so the reads
// find them ready instead of faulting each in; never further ahead than that, so a length the
// peer does not send costs no memory. Only a help: where it fails, the pages fault in.
StatusOr<std::string> ReadAndHash(Connection& connection, BlobFile& file, uint64_t from) {
  Sha256 hash;
  // One thread each: their tasks run in the order posted. Declared after what their tasks
  // use, so on any return they stop and join first.
  net::thread_pool hashing(1), allocating(1);
  auto hash_range = [&](uint64_t at, uint64_t n) {
    net::post(hashing, [&hash, bytes = file.bytes() + at, n] { hash.Update(bytes, n); });
  };
  auto allocate_chunk = [&](uint64_t at) {
    if (at >= file.size()) return;
    const uint64_t n = std::min(file.size() - at, kChunkBytes);
    net::post(allocating, [fd = file.fd(), at, n] {
      ::fallocate(fd, 0, static_cast<off_t>(at), static_cast<off_t>(n));
    });
  };
  if (from > 0) hash_range(0, from);
  allocate_chunk(from);
  for (uint64_t at = from; at < file.size();) {
    const uint64_t want = std::min(file.size() - at, kChunkBytes);
    allocate_chunk(at + want);
    if (error_code ec = connection.ReadExactly(net::buffer(file.bytes() + at, want))) {
      return UnavailableError("reading a blob from " + connection.Where() + ": " + ec.message());
    }
    hash_range(at, want);
    at += want;
  }
  hashing.join();  // every chunk hashed
  return hash.HexDigest();
}

}  // namespace

StatusOr<std::unique_ptr<PeerClient>> PeerClient::Make(const ClusterOptions& options) {
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (options.peer_check == PeerCertificateCheck::kNone) {
    KC_ASSIGN_OR_RETURN(auto context, tls::MakeUnverifiedClientContext());
    tls = std::make_unique<boost::asio::ssl::context>(std::move(context));
  } else if (!options.peer_ca.empty()) {
    auto context = tls::MakeClientContext(options.peer_ca);
    if (!context.ok()) return context.status().WithContext("--cluster-peer-ca");
    tls = std::make_unique<boost::asio::ssl::context>(std::move(*context));
  }
  return std::make_unique<PeerClient>(options.secret, std::move(tls));
}

StatusOr<store::BlobPtr> PeerClient::Fetch(const std::string& node_url,
                                           const std::string& sha256) const {
  KC_ASSIGN_OR_RETURN(auto connection, Connect(node_url, tls_.get(), timeout_));
  const std::string target = "/cluster/blobs/" + sha256;
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, connection->Where());
  request.set(kPeerHeader, SignPeerRequest(secret_, "GET", target, UnixSecondsNow()));
  if (error_code ec = connection->Write(request)) {
    return UnavailableError("asking " + node_url + " for blob " + sha256 + ": " + ec.message());
  }

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  if (error_code ec = connection->Read(buffer, parser, /*header_only=*/true)) {
    return UnavailableError("reading " + node_url + "'s answer: " + ec.message());
  }
  const int status = parser.get().result_int();
  if (status == 404) return NotFoundError(node_url + " does not have blob " + sha256);
  if (status != 200) {
    return UnavailableError(node_url + " answered " + std::to_string(status) + " for blob " +
                            sha256);
  }
  const auto length = parser.content_length();
  if (!length) return UnavailableError(node_url + " sent blob " + sha256 + " without a length");
  KC_ASSIGN_OR_RETURN(BlobFile file, BlobFile::Make(*length));
  const size_t early = std::min<uint64_t>(buffer.size(), *length);  // came with the header
  if (early > 0) std::memcpy(file.bytes(), buffer.data().data(), early);
  KC_ASSIGN_OR_RETURN(std::string actual, ReadAndHash(*connection, file, early));
  if (actual != sha256) {
    return UnavailableError(node_url + " sent bytes hashing to " + actual + " for blob " + sha256);
  }
  return std::move(file).Seal(sha256);
}

Status PeerClient::Push(const std::string& node_url, const store::BlobPtr& blob) const {
  Mapping bytes;
  bytes.size = blob->size();
  if (bytes.size > 0) {
    bytes.data = ::mmap(nullptr, bytes.size, PROT_READ, MAP_SHARED, blob->fd(), 0);
    if (bytes.data == MAP_FAILED) return InternalError("mapping a result to send it");
  }
  KC_ASSIGN_OR_RETURN(auto connection, Connect(node_url, tls_.get(), timeout_));
  const std::string target = "/cluster/blobs";
  http::request<http::buffer_body> request{http::verb::post, target, 11};
  request.set(http::field::host, connection->Where());
  request.set(http::field::content_type, "application/octet-stream");
  request.set("X-KCoral-Blob-SHA256", blob->sha256());
  request.set(kPeerHeader, SignPeerRequest(secret_, "POST", target, UnixSecondsNow()));
  request.body().data = bytes.size > 0 ? bytes.data : nullptr;
  request.body().size = bytes.size;
  request.body().more = false;
  request.content_length(bytes.size);
  if (error_code ec = connection->Write(request)) {
    return UnavailableError("sending a result to " + node_url + ": " + ec.message());
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  if (error_code ec = connection->Read(buffer, parser)) {
    return UnavailableError("reading " + node_url + "'s answer: " + ec.message());
  }
  const auto& response = parser.get();
  if (response.result_int() != 200) {
    return UnavailableError(node_url +
                            " refused a result: " + std::to_string(response.result_int()) + " " +
                            response.body().substr(0, 300));
  }
  return Status::Ok();
}

}  // namespace kc::cluster
