// dist_checkpoint_testing.h (internal): fault injection for the sharded-checkpoint tests.
#pragma once
#include <cstdint>

namespace oneflow::distributed::testing {

// What rank 0 does instead of writing index.json at the end of the next saves (process-wide):
// kFail raises an of::Error (every rank's save then raises it), kKill ends the process with
// SIGKILL (a crash between the rank files and the index). Returns the previous setting.
enum class IndexFault { kNone, kFail, kKill };
IndexFault set_index_fault(IndexFault fault);

// What this rank's last load_checkpoint read: the rank files it opened, and the bytes of the
// saved pieces it used (each checked against its CRC-32; the rest of a file is never touched).
struct LoadStats {
  int64_t files = 0, piece_bytes = 0;
};
LoadStats last_load_stats();

}  // namespace oneflow::distributed::testing
