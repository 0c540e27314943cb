// dist_checkpoint_testing.h (internal): fault injection for the sharded-checkpoint tests.
#pragma once

namespace oneflow::distributed::testing {

// What rank 0 does instead of writing index.json at the end of the next saves (process-wide):
// kFail raises an of::Error (every rank's save then raises it), kKill ends the process with
// SIGKILL (a crash between the rank files and the index). Returns the previous setting.
enum class IndexFault { kNone, kFail, kKill };
IndexFault set_index_fault(IndexFault fault);

}  // namespace oneflow::distributed::testing
