// BuildCacheHooks: the build cache (store/build_cache.h) around each run of a
// sandboxed worker: restore the entry of a byte-identical program into the
// workspace's cache before it runs, save the workspace's cache after a run
// the worker answered. Thread-safe (BuildCache is).
#pragma once

#include "pool/worker_pool.h"
#include "store/build_cache.h"

namespace kc::server {

class BuildCacheHooks : public pool::WorkspaceHooks {
 public:
  explicit BuildCacheHooks(store::BuildCache& cache) : cache_(cache) {}

  void BeforeRun(const pool::RunRequest& run, pool::Workspace& workspace) override {
    cache_.Restore(store::BuildCache::KeyOf(run.program_json), workspace.cache(), workspace.owner(),
                   workspace.group());
  }
  void AfterRun(const pool::RunRequest& run, bool answered, pool::Workspace& workspace) override {
    if (answered) cache_.Save(store::BuildCache::KeyOf(run.program_json), workspace.cache());
  }

 private:
  store::BuildCache& cache_;
};

}  // namespace kc::server
