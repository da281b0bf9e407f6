#include "server/status/status_board.h"

#include <utility>

namespace kc::server {

namespace {

// What a tenant may see of `status`: its own queue entry.
nlohmann::json TenantView(const nlohmann::json& status, const std::string& tenant) {
  nlohmann::json view = status;
  if (auto queue = view.find("queue"); queue != view.end() && queue->is_object()) {
    if (auto by_tenant = queue->find("by_tenant");
        by_tenant != queue->end() && by_tenant->is_object()) {
      nlohmann::json own = nlohmann::json::object();
      if (by_tenant->contains(tenant)) own[tenant] = (*by_tenant)[tenant];
      *by_tenant = std::move(own);
    }
  }
  return view;
}

}  // namespace

// Each kind of viewer gets its own text: they differ at least in "viewer".
std::string StatusBoard::KindOf(const std::optional<Caller>& viewer) {
  if (!viewer) return "open";
  return (viewer->role == Role::kOperator ? "operator:" : "tenant:") + viewer->tenant;
}

bool StatusBoard::Fresh(Clock::time_point now) const {
  return built_at_ && now - *built_at_ < max_age_ && now >= *built_at_;
}

std::optional<StatusBoard::Seen> StatusBoard::Ready(const std::optional<Caller>& viewer,
                                                    Clock::time_point now) const {
  const std::string kind = KindOf(viewer);
  std::lock_guard lock(mu_);
  if (!Fresh(now)) return std::nullopt;
  auto text = views_.find(kind);
  if (text == views_.end()) return std::nullopt;
  return Seen{text->second,
              std::chrono::duration_cast<std::chrono::milliseconds>(now - *built_at_)};
}

StatusBoard::Seen StatusBoard::View(const std::optional<Caller>& viewer, Clock::time_point now) {
  const bool everything = !viewer || viewer->role == Role::kOperator;
  const std::string kind = KindOf(viewer);
  std::lock_guard lock(mu_);
  if (!Fresh(now)) {
    built_ = build_();
    built_at_ = now;
    ++builds_;
    built_.status["snapshot_builds"] = builds_;
    views_.clear();
  }
  auto& text = views_[kind];
  if (text == nullptr) {
    nlohmann::json view = everything ? built_.status : TenantView(built_.status, viewer->tenant);
    view["viewer"] = {{"role", !viewer      ? "open"
                               : everything ? "operator"
                                            : "tenant"},
                      {"tenant", viewer ? viewer->tenant : ""}};
    // The object's closing brace gives way to the requests' array, spliced from their texts.
    std::string out = view.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out.pop_back();
    out += R"(,"requests":[)";
    bool first = true;
    for (const RenderedRequest& request : built_.requests) {
      if (!everything && request.tenant != viewer->tenant) continue;
      if (!std::exchange(first, false)) out += ',';
      out += *request.json;
    }
    out += "]}";
    text = std::make_shared<const std::string>(std::move(out));
  }
  return {text, std::chrono::duration_cast<std::chrono::milliseconds>(now - *built_at_)};
}

uint64_t StatusBoard::builds() const {
  std::lock_guard lock(mu_);
  return builds_;
}

}  // namespace kc::server
