// The wire value encoding (spec/protocol.md §4.2, python/kcoral/_worker/values.py) of a plain
// JSON document, written in C++ for sealed benchmark records: the record is the result exactly as
// the server reads a returned value, so the server can put it in place of what user code
// returned without decoding anything else (docs/benchmark-integrity.md).
//
//   null -> {"type":"null"}            true -> {"type":"boolean","value":true}
//   3    -> {"type":"integer","value":3}  0.5 -> {"type":"number","value":0.5}
//   "s"  -> {"type":"string","value":"s"}
//   [..] -> {"type":"array","value":[nodes]}  {..} -> {"type":"object","value":{k: node}}
//
// Written straight as compact JSON text (no tree of nodes is built: a seal is on the path of
// every benchmark call); scalars are spelled as nlohmann's dump spells them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::worker {

// Appends the encoding of `value` to `out`. kInvalidArgument for a non-finite number, which no
// returned value may hold.
Status AppendWireValue(const nlohmann::ordered_json& value, std::string& out);

}  // namespace kc::worker
