#include "cluster/cluster_node.h"

#if KCORAL_WITH_CLUSTER
#include "cluster/nats_link.h"
#include "cluster/node_registry.h"
#include "cluster/pool_view.h"
#endif

namespace kc::cluster {

#if KCORAL_WITH_CLUSTER

struct ClusterNode::Parts {
  ClusterOptions options;
  std::unique_ptr<NatsLink> link;
  std::unique_ptr<NodeRegistry> registry;  // declared after link: destroyed before it
};

StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Join(const ClusterOptions& options,
                                                         std::string node_id,
                                                         std::function<nlohmann::json()> describe) {
  auto parts = std::make_unique<Parts>();
  parts->options = options;
  KC_ASSIGN_OR_RETURN(parts->link, NatsLink::Connect(parts->options, "kcoral " + node_id));
  KC_ASSIGN_OR_RETURN(parts->registry, NodeRegistry::Join(*parts->link, std::move(node_id),
                                                          options.heartbeat, std::move(describe)));
  return std::unique_ptr<ClusterNode>(new ClusterNode(std::move(parts)));
}

nlohmann::json ClusterNode::Describe() const {
  nlohmann::json out = {{"servers", parts_->options.servers},
                        {"connected_url", parts_->link->ConnectedUrl()},
                        {"connected", parts_->link->connected()},
                        {"node_id", parts_->registry->node_id()}};
  auto nodes = parts_->registry->View();
  if (nodes.ok()) {
    out["pools"] = PoolsOf(*nodes);
    out["nodes"] = std::move(*nodes);
  } else {
    out["pools"] = nullptr;
    out["nodes"] = nullptr;
    out["nodes_error"] = nodes.status().message();
  }
  return out;
}

#else  // built without the NATS client

struct ClusterNode::Parts {};

StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Join(const ClusterOptions&, std::string,
                                                         std::function<nlohmann::json()>) {
  return FailedPreconditionError(
      "this kcoral-server was built without the NATS client (libnats-dev), so it cannot "
      "join a cluster: install libnats-dev and rebuild, or leave out --cluster");
}

nlohmann::json ClusterNode::Describe() const {
  return nullptr;
}

#endif

ClusterNode::ClusterNode(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
ClusterNode::~ClusterNode() = default;

}  // namespace kc::cluster
