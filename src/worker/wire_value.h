// The wire value encoding (spec/protocol.md §4.2, python/kcoral/_worker/values.py) of a plain
// JSON document, done in C++ for sealed benchmark records: the record is the result exactly as
// the server reads a returned value, so the server can put it in place of what user code
// returned without decoding anything else (docs/benchmark-integrity.md).
//
//   null -> {"type":"null"}            true -> {"type":"boolean","value":true}
//   3    -> {"type":"integer","value":3}  0.5 -> {"type":"number","value":0.5}
//   "s"  -> {"type":"string","value":"s"}
//   [..] -> {"type":"array","value":[nodes]}  {..} -> {"type":"object","value":{k: node}}
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::worker {

// kInvalidArgument for a non-finite number, which no returned value may hold.
StatusOr<nlohmann::ordered_json> ToWireValue(const nlohmann::ordered_json& value);

}  // namespace kc::worker
