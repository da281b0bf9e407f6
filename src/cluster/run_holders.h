// RunHolders: which node holds a request's run (docs/cluster.md "The run lease"). Every node's
// record lists, under "running", the keys it is running or holds an unstored outcome of; a
// node keeps each node's last record for the run lease, so a node gone silent is still known
// as the holder of its runs until the lease runs out. A redelivered request whose run another
// node holds waits for that node's outcome instead of running the program a second time.
//
// Pure: NodeRegistry feeds it the records it hears.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"

namespace kc::cluster {

struct RunHolder {
  // Empty: unknown. The asking node has not heard its own record lately, so it hears nobody's
  // (NodeRegistry::HolderOf) and cannot tell whether another node holds the run.
  std::string node_id;
  Clock::time_point heard;  // when its last record was written
  // Its last record lists the key. False: the node has been silent since before it could have
  // written a record listing it, so it may hold the run unlisted.
  bool listed = false;
  bool in_view = false;  // heard within three heartbeats (set by NodeRegistry)
};

class RunHolders {
 public:
  // `lease`: how long a silent node's last record is believed. `silent_after`: how long without
  // a record before a node may hold runs its last record does not list (two heartbeats).
  RunHolders(Clock::duration lease, Clock::duration silent_after)
      : lease_(lease), silent_after_(silent_after) {}

  // A record {"node_id", "instance_id", "running": [keys], "pools": [...], ...} written at
  // `at`. It replaces the node's last record unless that one is newer (records come late, and
  // out of order when a watch is made again). A restarted node's record replaces its last
  // life's: the runs that life held are gone.
  void Heard(const std::string& node_id, const nlohmann::json& record, Clock::time_point at);
  // The node deleted its record: it stopped, its runs finished or given up.
  void Left(const std::string& node_id);

  // Who holds `key`'s run as of `now`: a node whose last record lists it, heard within the
  // lease; else a node other than `self` serving `pool` silent for longer than silent_after
  // (within the lease), which may have taken it after its last record; else none.
  std::optional<RunHolder> HolderOf(const std::string& key, const std::string& pool,
                                    const std::string& self, Clock::time_point now) const;
  // What HolderOf weighed, for the event of a request run again with no holder found:
  // [{"node_id", "age_ms", "lists_key", "pools"}].
  nlohmann::json Describe(const std::string& key, Clock::time_point now) const;

 private:
  struct Held {
    std::set<std::string> running;
    std::set<std::string> pools;  // PoolIdOf each of its pools
    Clock::time_point at;
  };
  const Clock::duration lease_;
  const Clock::duration silent_after_;
  std::map<std::string, Held> nodes_;  // by node id
};

}  // namespace kc::cluster
