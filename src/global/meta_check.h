// meta_check.h (internal): to_global's check that the ranks of a placement ask for the same
// conversion (meta_check.cpp).
#pragma once
#include <string>
#include <vector>

#include "oneflow/placement.h"

namespace oneflow::global {

// NOTE [Checked global meta]: SPMD code asks every rank of a placement for the same conversion;
// a rank that asks for another SBP (or shape, dtype, placement) would run collectives that
// still match the others' in count and size and give a wrong tensor with no error. So to_global
// first compares what each rank asked for, as OneFlow's to_global(check_meta) does: each rank
// contributes one record per field — a 64-bit FNV-1a hash of the field's text and the text's
// first bytes — in one all-gather over the placement's ranks, and when a hash differs every
// rank raises the same error naming the field and what each rank asked for, before any data
// moves. A move between placements compares within the source placement, then within the
// target's (the ranks of one placement run the same code; a pipeline's stages need not call
// their moves in one order across the stages). A local tensor's own sizes are
// compared except along split dims (its pieces may differ there). distributed::
// set_check_global_meta(false) or OF_CHECK_GLOBAL_META=0 skips it; inside a traced function it
// runs while recording, and a replay does not repeat it. Ranks that disagree on which ranks take
// part cannot meet to compare (each waits for the ranks it names): that is not caught here.
struct MetaField {
  MetaField(const char* w, std::string t) : what(w), text(std::move(t)) {}
  const char* what;
  std::string text;
};

// Compares `fields` across `ranks` (this rank among them; fewer than two: nothing to compare)
// in one all-gather, raising on every rank when one differs.
void check_same_meta(const std::vector<MetaField>& fields, std::vector<int> ranks);
inline std::vector<int> ranks_of(const Placement& p) { return p.ranks(); }

}  // namespace oneflow::global
