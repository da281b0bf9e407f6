#include "worker/result_seal.h"

#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/hmac_sha256.h"
#include "worker/wire_value.h"

namespace py = pybind11;

namespace kc::worker {

const char* const kSealScope =
    "Python-level patching, frame rewriting and hand-made or edited results are detected: the "
    "statistics are computed and sealed in C++ with a per-worker key that no Python object "
    "holds, and the server checks the seal. Native code in the same process (ctypes, an "
    "uploaded library) could still read the key from memory and forge a record.";

namespace {

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.message());
}

// The dict user code gets: the same document as the record, as plain Python values.
py::object ToPython(const nlohmann::ordered_json& value) {
  using Json = nlohmann::ordered_json;
  switch (value.type()) {
    case Json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case Json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case Json::value_t::number_float:
      return py::float_(value.get<double>());
    case Json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case Json::value_t::array: {
      py::list items;
      for (const Json& item : value)
        items.append(ToPython(item));
      return items;
    }
    case Json::value_t::object: {
      py::dict members;
      for (const auto& [key, item] : value.items())
        members[py::str(key)] = ToPython(item);
      return members;
    }
    case Json::value_t::null:
    case Json::value_t::discarded:
    case Json::value_t::binary:
      break;
  }
  return py::none();
}

}  // namespace

Status ResultSealer::MakeKey() {
  KC_ASSIGN_OR_RETURN(key_, SealKey::Generate());
  key_for_server_ = true;
  return Status::Ok();
}

std::string ResultSealer::KeyHex() const {
  return key_ ? HexEncode(key_->bytes()) : std::string();
}

Status ResultSealer::Bind(const std::vector<std::string>& names, const py::list& chain,
                          const py::list& benign_wraps) {
  if (run_started_) {
    return FailedPreconditionError("bind_integrity: refused once the worker has taken a request");
  }
  facts_.Bind(names, chain, benign_wraps);
  return Status::Ok();
}

void ResultSealer::RunStarted(std::string request_id) {
  run_started_ = true;
  request_id_ = std::move(request_id);
  last_instruction_ = -1;
  instruction_open_ = false;
}

void ResultSealer::RunFinished() {
  request_id_.clear();
  instruction_open_ = false;
}

Status ResultSealer::InstructionStarted(int index) {
  if (instruction_open_ || index != last_instruction_ + 1) {
    return FailedPreconditionError("instruction_started(" + std::to_string(index) +
                                   "): out of order");
  }
  last_instruction_ = index;
  instruction_open_ = true;
  return Status::Ok();
}

Status ResultSealer::InstructionFinished(int index) {
  if (!instruction_open_ || index != last_instruction_) {
    return FailedPreconditionError("instruction_finished(" + std::to_string(index) +
                                   "): no such instruction is running");
  }
  instruction_open_ = false;
  return Status::Ok();
}

py::dict ResultSealer::Seal(nlohmann::ordered_json result) {
  using Json = nlohmann::ordered_json;
  if (!result.is_object()) throw std::invalid_argument("seal_result: the result is not an object");
  if (!key_) {  // a plain interpreter that imported _core: a key no server will ever know
    StatusOr<std::unique_ptr<SealKey>> key = SealKey::Generate();
    ThrowIfError(key.status());
    key_ = std::move(key).value();
  }
  // ordered_json keeps members in a vector: no reference into it survives an insertion.
  Json integrity = result.contains("integrity") ? result["integrity"] : Json::object();
  if (!integrity.is_object()) integrity = Json::object();
  Json flags = integrity.contains("flags") ? integrity["flags"] : Json::array();
  if (!flags.is_array()) flags = Json::array();
  // Every sealed record carries both lists, so consumers read one schema from either timer.
  Json conditions = integrity.contains("conditions") ? integrity["conditions"] : Json::array();
  if (!conditions.is_array()) conditions = Json::array();

  PythonFindings found = facts_.Check();
  integrity["request_id"] = request_id_;
  integrity["instruction_index"] = instruction_open_ ? Json(last_instruction_) : Json(nullptr);
  integrity["python"] = found.ToJson();
  integrity["key_in_secret_memory"] = key_->in_secret_memory();
  integrity["scope"] = kSealScope;
  if (!instruction_open_) flags.push_back("sealed outside any instruction of a request");
  if (!key_for_server_) flags.push_back("sealed outside a serving kcoral worker");
  for (std::string& flag : found.flags)
    flags.push_back(std::move(flag));
  integrity["flags"] = std::move(flags);
  integrity["conditions"] = std::move(conditions);
  result["integrity"] = std::move(integrity);

  std::string record;
  record.reserve(4096);
  ThrowIfError(AppendWireValue(result, record));
  const std::string seal = HmacSha256Hex(key_->bytes(), record);

  py::dict sealed = ToPython(result);
  py::dict out_integrity = sealed["integrity"];
  out_integrity["record"] = py::str(record);
  out_integrity["seal"] = py::str(seal);
  return sealed;
}

}  // namespace kc::worker
