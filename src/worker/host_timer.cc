#include "worker/host_timer.h"

#include <time.h>

#include <cmath>
#include <vector>

#include "base/iteration_count.h"
#include "base/latency_summary.h"

namespace py = pybind11;

namespace kc::worker {

namespace {

int64_t NowNs() {
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// One call of fn(*args); the result is dropped after the clock is read, by the caller.
class Call {
 public:
  Call(const py::object& fn, const py::tuple& args)
      : fn_(fn.ptr()),
        items_(reinterpret_cast<PyTupleObject*>(args.ptr())->ob_item),
        count_(PyTuple_GET_SIZE(args.ptr())) {}

  PyObject* operator()() const {
    PyObject* out = PyObject_Vectorcall(fn_, items_, static_cast<size_t>(count_), nullptr);
    if (out == nullptr) throw py::error_already_set();
    return out;
  }

 private:
  PyObject* fn_;
  PyObject* const* items_;
  Py_ssize_t count_;
};

void CallDropping(const Call& call) {
  Py_DECREF(call());
}

bool ValidBudget(double ms) {
  return std::isfinite(ms) && ms >= 0;
}

}  // namespace

int64_t HostIterationCount(std::optional<int64_t> explicit_count, double budget_ms,
                           double estimate_ms, int64_t minimum) {
  if (explicit_count) return *explicit_count;
  return BudgetIterationCount(budget_ms, estimate_ms, minimum, kMaxHostIterations);
}

StatusOr<nlohmann::ordered_json> RunHostBenchmark(const py::object& fn, const py::tuple& args,
                                                  const HostBenchmarkOptions& options) {
  if (!PyCallable_Check(fn.ptr()))
    return InvalidArgumentError("host_benchmark: fn is not callable");
  if (options.warmup && *options.warmup < 0) return InvalidArgumentError("warmup must be >= 0");
  if (options.repeat && *options.repeat < 1) return InvalidArgumentError("repeat must be >= 1");
  if (!ValidBudget(options.warmup_ms) || !ValidBudget(options.repeat_ms)) {
    return InvalidArgumentError("warmup_ms and repeat_ms must be finite and >= 0");
  }
  const Call call(fn, args);
  CallDropping(call);  // untimed: first-use costs are not the kernel's
  const int64_t estimate_start = NowNs();
  for (int i = 0; i < 5; ++i)
    CallDropping(call);
  const double estimate_ms = static_cast<double>(NowNs() - estimate_start) / 5e6;
  const int64_t warmup = HostIterationCount(options.warmup, options.warmup_ms, estimate_ms, 0);
  const int64_t repeat = HostIterationCount(options.repeat, options.repeat_ms, estimate_ms, 1);

  for (int64_t i = 0; i < warmup; ++i)
    CallDropping(call);
  std::vector<double> samples_ms(static_cast<size_t>(repeat));
  for (double& sample : samples_ms) {
    const int64_t start = NowNs();
    PyObject* out = call();
    const int64_t end = NowNs();
    Py_DECREF(out);  // freeing the callable's result is not the callable's time
    sample = static_cast<double>(end - start) / 1e6;
  }

  nlohmann::ordered_json result = nlohmann::ordered_json::object();
  for (auto& [key, value] : SummarizeLatencies(std::move(samples_ms))) {
    if (key == "n_samples") {
      result[key] = repeat;  // a count, as the Python timer reported it
    } else {
      result[key] = value;
    }
  }
  result["activities_stable"] = true;  // the host timer sees no device activities
  result["flush_l2"] = false;          // and flushes no cache
  result["warmup"] = warmup;
  result["repeat"] = repeat;
  result["timer"] = "host";
  return result;
}

}  // namespace kc::worker
