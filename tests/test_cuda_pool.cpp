// test_cuda_pool.cpp: the CUDA caching allocator's policy (src/cuda/caching_pool.h) on a fake
// device, so that it runs on every CI machine: size classes and splitting, merging, stream-aware
// reuse and record_stream's events, private pools (CUDA Graph capture), out-of-memory retry and
// the error, statistics.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "cuda/caching_pool.h"
#include "cuda/host_pool.h"
#include "oneflow/oneflow.h"

namespace {

using oneflow::cuda_pool::CachingPool;
constexpr size_t MiB = size_t(1) << 20;

struct FakeState {
  size_t capacity = size_t(1) << 30, used = 0;
  std::map<void*, size_t> segments;
  std::map<int, std::pair<int, bool>> events;  // id -> (stream, done)
  int next_event = 1;
  int mallocs = 0, frees = 0, syncs = 0;
};

// Streams are ints; an event completes when the test says its stream has caught up.
struct FakeDevice {
  using Stream = int;
  using Event = int;
  std::shared_ptr<FakeState> st;
  void* malloc(size_t n) {
    if (st->used + n > st->capacity) return nullptr;
    void* p = std::malloc(n);
    st->segments[p] = n;
    st->used += n;
    ++st->mallocs;
    return p;
  }
  void free(void* p) {
    REQUIRE(st->segments.count(p));
    st->used -= st->segments[p];
    st->segments.erase(p);
    std::free(p);
    ++st->frees;
  }
  Event record(Stream s) {
    st->events[st->next_event] = {s, false};
    return st->next_event++;
  }
  bool done(const Event& e) { return st->events.at(e).second; }
  void wait(const Event& e) { st->events.at(e).second = true; }
  void destroy(const Event& e) { st->events.erase(e); }
  void synchronize() {
    ++st->syncs;
    for (auto& [id, ev] : st->events) ev.second = true;
  }
  size_t free_bytes() { return st->capacity - st->used; }
};

void stream_caught_up(FakeState& st, int stream) {
  for (auto& [id, ev] : st.events)
    if (ev.first == stream) ev.second = true;
}

char* bytes(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("cuda pool: rounding, reuse of a freed block, splitting and merging") {
  auto st = std::make_shared<FakeState>();
  {
    CachingPool<FakeDevice> pool(FakeDevice{st});
    void* a = pool.allocate(1000, 1);
    CHECK(pool.stats().allocated == 1024);    // rounded to 512
    CHECK(pool.stats().reserved == 2 * MiB);  // one small segment
    void* b = pool.allocate(512, 1);
    void* c = pool.allocate(3000, 1);
    CHECK(bytes(b) == bytes(a) + 1024);  // carved from the same segment, in order
    CHECK(bytes(c) == bytes(b) + 512);
    CHECK(st->mallocs == 1);
    pool.release(a);
    pool.release(b);                   // merges with a
    void* d = pool.allocate(1536, 1);  // exactly the merged block
    CHECK(d == a);
    CHECK(pool.stats().num_cache_hits == 3);
    pool.release(c);
    pool.release(d);
    CHECK(pool.stats().allocated == 0);
    CHECK(pool.stats().peak_allocated == 1024 + 512 + 3072);
    // all merged back: one free segment, returned by empty_cache
    pool.empty_cache();
    CHECK(pool.stats().reserved == 0);
    CHECK(st->frees == 1);
    // large requests: 5 MiB from a 20 MiB segment (the rest split off), 30 MiB from its own
    void* l = pool.allocate(5 * MiB, 1);
    CHECK(pool.stats().reserved == 20 * MiB);
    void* l2 = pool.allocate(12 * MiB, 1);  // in the 15 MiB rest
    CHECK(bytes(l2) == bytes(l) + 5 * MiB);
    void* huge = pool.allocate(30 * MiB + 7, 1);
    CHECK(pool.stats().reserved == 20 * MiB + 32 * MiB);
    pool.reset_peak();
    CHECK(pool.stats().peak_allocated == pool.stats().allocated);
    pool.release(l);
    pool.release(l2);
    pool.release(huge);
  }
  CHECK(st->segments.empty());  // the destructor gave everything back
}

TEST_CASE("cuda pool: a block is reused on its own stream; record_stream waits for the others") {
  auto st = std::make_shared<FakeState>();
  CachingPool<FakeDevice> pool(FakeDevice{st});
  void* a = pool.allocate(4096, 1);
  pool.release(a);
  void* b = pool.allocate(4096, 2);  // another stream: not the block stream 1 freed
  CHECK(b != a);
  void* c = pool.allocate(4096, 1);  // stream 1 again: the cached block
  CHECK(c == a);
  // used on stream 3 too: freeing records an event there; no reuse before it completes
  pool.record_stream(c, 3);
  pool.record_stream(c, 1);  // its own stream: nothing to wait for
  pool.release(c);
  CHECK(pool.pending_blocks() == 1);
  CHECK(st->events.size() == 1);
  void* d = pool.allocate(4096, 1);
  CHECK(d != c);
  stream_caught_up(*st, 3);
  CHECK(pool.pending_blocks() == 0);
  CHECK(st->events.empty());  // the event was destroyed once seen
  void* e = pool.allocate(4096, 1);
  CHECK(e == c);
  CHECK_THROWS_WITH_AS(pool.record_stream(reinterpret_cast<void*>(16), 2),
                       doctest::Contains("not a block"), oneflow::Error);
  for (void* p : {b, d, e}) pool.release(p);
}

TEST_CASE("cuda pool: private pools for graph capture keep their blocks to themselves") {
  auto st = std::make_shared<FakeState>();
  CachingPool<FakeDevice> pool(FakeDevice{st});
  void* shared = pool.allocate(8192, 1);
  pool.release(shared);  // cached in the default pool
  pool.begin_pool(1, 7);
  void* g = pool.allocate(8192, 1);  // capture: from the graph's pool, not the cached block
  CHECK(g != shared);
  void* other = pool.allocate(8192, 2);  // another stream is not capturing
  pool.end_pool(1);
  pool.release(g);
  void* after = pool.allocate(8192, 1);  // after capture: never the graph's block
  CHECK(after == shared);
  CHECK(after != g);
  const size_t reserved = pool.stats().reserved;
  pool.release_pool(7);  // the graph is gone
  CHECK(pool.stats().reserved == reserved - 2 * MiB);
  CHECK_THROWS_AS(pool.begin_pool(1, 0), oneflow::Error);
  // a block of a released pool still in use goes back when freed
  pool.begin_pool(1, 8);
  void* late = pool.allocate(100, 1);
  pool.end_pool(1);
  pool.release_pool(8);
  const size_t before = pool.stats().reserved;
  pool.release(late);
  CHECK(pool.stats().reserved == before - 2 * MiB);
  pool.release(after);
  pool.release(other);
}

TEST_CASE("cuda pool: out of memory frees the cache and retries, then fails clearly") {
  auto st = std::make_shared<FakeState>();
  st->capacity = 21 * MiB;
  CachingPool<FakeDevice> pool(FakeDevice{st});
  void* s = pool.allocate(1000, 1);
  pool.release(s);                      // a cached 2 MiB segment
  void* a = pool.allocate(9 * MiB, 1);  // needs 20 MiB: only after the cache is given back
  CHECK(pool.stats().num_ooms == 1);
  CHECK(pool.stats().reserved == 20 * MiB);
  void* b = pool.allocate(9 * MiB, 1);  // the split rest of the same segment
  CHECK(pool.stats().num_segments == 2);
  const auto before = pool.stats();
  CHECK_THROWS_WITH_AS(pool.allocate(9 * MiB, 1),
                       doctest::Contains("out of memory allocating 9437184 bytes (a 20971520-byte "
                                         "segment): 18874368 bytes allocated, 20971520 reserved"),
                       oneflow::Error);
  CHECK(pool.stats().allocated == before.allocated);
  CHECK(pool.stats().num_ooms == 2);
  // pending events are waited for before giving up
  pool.record_stream(b, 5);
  pool.release(b);
  pool.release(a);
  CHECK(pool.pending_blocks() == 1);     // b waits for stream 5, so the segment is not free
  void* c = pool.allocate(15 * MiB, 1);  // OOM path: wait for events, merge, reuse
  CHECK(c != nullptr);
  CHECK(pool.pending_blocks() == 0);
  pool.release(c);
}

// ---------------------------------------------------------------- pinned host memory

TEST_CASE("pinned host pool: size classes, reuse only after the copies that used a block end") {
  // NOTE [Pinned host memory]
  auto st = std::make_shared<FakeState>();
  FakeDevice dev{st};
  oneflow::cuda_pool::HostPool<FakeDevice> pool(dev);
  void* a = pool.allocate(100);  // a 4 KiB block
  CHECK(st->mallocs == 1);
  CHECK(pool.stats().reserved == 4096);
  CHECK(pool.owns(a));
  CHECK(pool.owns(bytes(a) + 4095));
  CHECK_FALSE(pool.owns(bytes(a) + 4096));
  int stack = 0;
  CHECK_FALSE(pool.owns(&stack));
  // freed with no copy pending: the next request of its class takes it
  pool.free(a);
  void* b = pool.allocate(4000);
  CHECK(b == a);
  CHECK(st->mallocs == 1);
  CHECK(pool.stats().num_cache_hits == 1);
  // a copy on stream 3 read it: freed, it waits for that copy
  pool.record_use(bytes(b) + 16, 3);
  pool.free(b);
  void* c = pool.allocate(4000);
  CHECK(c != b);  // a new block: the copy may still be reading b
  CHECK(st->mallocs == 2);
  stream_caught_up(*st, 3);
  pool.free(c);
  void* d = pool.allocate(10);
  CHECK((d == b || d == c));
  CHECK(st->mallocs == 2);
  // another class
  void* e = pool.allocate(5000);  // 8 KiB
  CHECK(pool.stats().reserved == 4096 + 4096 + 8192);
  pool.free(d);
  pool.free(e);
  CHECK(pool.stats().allocated == 0);
  pool.empty_cache();
  CHECK(pool.stats().reserved == 0);
  CHECK(st->frees == 3);
  CHECK_FALSE(pool.owns(e));
}

TEST_CASE(
    "pinned host pool: out of memory waits for copies, frees the cache, then says what it holds") {
  auto st = std::make_shared<FakeState>();
  st->capacity = 64 << 10;
  FakeDevice dev{st};
  oneflow::cuda_pool::HostPool<FakeDevice> pool(dev);
  void* a = pool.allocate(32 << 10);
  pool.record_use(a, 1);
  pool.free(a);                       // cached, its copy pending
  void* b = pool.allocate(48 << 10);  // 64 KiB: only after the cached 32 KiB goes back
  CHECK(b != nullptr);
  CHECK(st->frees == 1);
  std::string msg;
  try {
    (void)pool.allocate(1);
  } catch (const of::Error& err) { msg = err.what(); }
  CHECK(msg.find("out of pinned host memory") != std::string::npos);
  CHECK(msg.find("65536 bytes in use") != std::string::npos);
  pool.free(b);
  pool.empty_cache();  // the fake's memory goes back (the pool itself never frees on exit)
  CHECK(st->used == 0);
}
