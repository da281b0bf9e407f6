// How much an event of the server's log matters. The pool reports its lifecycle at these levels
// (pool/event_sink.h) and the server's log writes them (server/event_log.h): a level belongs to
// neither, so it lives here.
#pragma once

namespace kc {

enum class EventLevel { kInfo, kWarning, kError };

}  // namespace kc
