// Value codec, server side (spec/protocol.md §4.2-§4.3).
//
// The worker encodes Python values into "raw" value nodes whose binary nodes
// carry `"part": <int>`, an index into the binary segments it sent beside the
// outcome. The worker runs untrusted code, so nothing it sends is trusted:
// FinalizeResults checks every node's exact key set and types, checks tensor
// and file lengths, requires the part indices to appear once each in
// depth-first order (results keys in order), and rewrites each binary node
// into its wire form: `"part": "return:<k>"` plus `"sha256"` computed here
// (and `"size"` for files).
//
// Raw node shapes accepted from the worker:
//   {"type":"null"} {"type":"boolean","value":b} {"type":"integer","value":n}
//   {"type":"number","value":x (finite)} {"type":"string","value":s}
//   {"type":"array","value":[node...]} {"type":"object","value":{k: node}}
//   {"type":"bytes","part":i}
//   {"type":"tensor","dtype":d,"shape":[...],"part":i}
//   {"type":"file","part":i}
//   {"type":"folder","files":{path: {"type":"file","part":i}},"directories":[...]}
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

// `results` is the worker's results object (key -> raw node), rewritten in
// place. `segments[i]` holds the bytes of part i. Errors are kInternal
// naming the offending key path (a misbehaving worker, reported as engine).
Status FinalizeResults(nlohmann::ordered_json& results,
                       const std::vector<std::string_view>& segments);

// True if any node in (finalized) `results` refers to a binary part.
bool HasBinaryParts(const nlohmann::ordered_json& results);

}  // namespace kc::protocol
