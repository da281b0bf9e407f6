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
//
// Scalars are left as the worker wrote them: integers of any size keep their
// digits and strings may hold lone surrogates (json_value.h, §4.2).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "protocol/json_value.h"

namespace kc::protocol {

// Python's encoder stops near its recursion limit; the worker refuses values
// nested deeper than this (values.py), and so does FinalizeResults. A node is
// two JSON levels (the node and its value), so a worker outcome nests at most
// kMaxOutcomeDepth deep.
constexpr int kMaxValueDepth = 1000;
constexpr size_t kMaxOutcomeDepth = 2 * kMaxValueDepth + 8;

// `results` is the worker's results object (key -> raw node), rewritten in
// place. `segments[i]` holds the bytes of part i; every one must be used, so
// on success the reply carries binary parts exactly when `segments` is not
// empty. Errors are kInternal naming the offending key path (a misbehaving
// worker, reported as engine).
Status FinalizeResults(JsonValue& results, const std::vector<std::string_view>& segments);

}  // namespace kc::protocol
