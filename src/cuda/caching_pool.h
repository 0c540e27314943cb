// caching_pool.h (internal): the policy of the CUDA caching allocator, written against a small
// device interface so that the CPU test suite drives it with a fake device (tests/
// test_cuda_pool.cpp) and the CUDA module with cudaMalloc and events (src/cuda/allocator.cpp).
//
// NOTE [CUDA caching allocator]:
//  - Size classes. Requests are rounded up to 512 bytes. Up to 1 MiB they are carved from 2 MiB
//    segments (the small pool); larger ones from segments of 20 MiB (requests up to 10 MiB) or
//    of the request rounded to 2 MiB (the large pool). A free block is split when the rest is
//    worth keeping (>= 512 bytes in the small pool, > 1 MiB in the large one); freed neighbours
//    within a segment merge again. The search is best fit in sets ordered by (pool, stream,
//    size, address).
//  - Streams. A block belongs to the stream it was allocated on, and a freed block is reused
//    only by allocations on that stream (stream order makes that safe without a sync). A block
//    also used on other streams (record_stream) gets an event recorded on each of them when it
//    is freed, and returns to the free sets only once they have all completed.
//  - Private pools. While a CUDA Graph captures on a stream, that stream's allocations come
//    from the graph's own pool (begin_pool/end_pool): its blocks are never handed to anything
//    else, so the addresses the graph baked in stay valid for its replays; release_pool gives
//    the pool's segments back once the graph is destroyed and the blocks are free.
//  - Out of memory: wait for the pending events, give the cached segments back, retry once;
//    then an error naming the size asked for, what is allocated and reserved, and what the
//    device reports free.
//  - Statistics: allocated/reserved bytes and their peaks, allocation and cache-hit counts.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "oneflow/error.h"

namespace oneflow::cuda_pool {

inline constexpr size_t kRound = 512;
inline constexpr size_t kSmallSize = size_t(1) << 20;      // small pool: requests <= 1 MiB
inline constexpr size_t kSmallSegment = size_t(2) << 20;   // carved from 2 MiB segments
inline constexpr size_t kLargeSegment = size_t(20) << 20;  // requests up to 10 MiB: 20 MiB
inline constexpr size_t kLargeCutoff = size_t(10) << 20;
inline constexpr size_t kLargeRound = size_t(2) << 20;

inline size_t round_request(size_t n) {
  return (std::max<size_t>(n, 1) + kRound - 1) / kRound * kRound;
}
inline size_t segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded <= kLargeCutoff) return kLargeSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

struct PoolStats {
  size_t allocated = 0, reserved = 0;  // bytes in live blocks / in segments held
  size_t peak_allocated = 0, peak_reserved = 0;
  size_t num_allocs = 0, num_cache_hits = 0, num_segments = 0, num_ooms = 0;
};

// D: the device. using Stream = ...; using Event = ...;
//   void* malloc(size_t) (nullptr when out of memory); void free(void*);
//   Event record(Stream) (an event recorded on the stream now); bool done(const Event&);
//   void wait(const Event&) (blocks the host until it completed); void destroy(const Event&);
//   void synchronize() (the whole device); size_t free_bytes() (what the device reports free)
template <class D> class CachingPool {
 public:
  using Stream = typename D::Stream;
  using Event = typename D::Event;

  explicit CachingPool(D device) : dev_(std::move(device)) {}
  // (The CUDA module's pools live until the process ends: tensors in static storage may outlive
  // any destructor. Tests destroy theirs: every segment goes back.)
  ~CachingPool() {
    std::set<Block*> all;
    for (auto* set : {&small_free_, &large_free_}) all.insert(set->begin(), set->end());
    for (auto& [p, b] : live_) all.insert(b);
    for (auto& p : pending_) {
      all.insert(p.block);
      dev_.destroy(p.event);
    }
    for (Block* b : all) {
      if (b->segment_start) dev_.free(b->ptr);
      delete b;
    }
  }
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // `nbytes` on `stream`; the block's address. Throws of::Error when the device is full.
  void* allocate(size_t nbytes, Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    const size_t size = round_request(nbytes);
    const int pool = pool_of(stream);
    const bool small = size <= kSmallSize;
    Block* b = take_free(pool, stream, size, small);
    if (b) {
      ++stats_.num_cache_hits;
    } else {
      const size_t seg = segment_size(size);
      void* p = dev_.malloc(seg);
      if (!p) {
        ++stats_.num_ooms;
        wait_all_events();
        release_cached(/*pool=*/-1);
        p = dev_.malloc(seg);
      }
      if (!p)
        fail(
            "[cuda] out of memory allocating {} bytes (a {}-byte segment): {} bytes allocated, "
            "{} reserved by the caching allocator, {} free on the device",
            nbytes, seg, stats_.allocated, stats_.reserved, dev_.free_bytes());
      b = new Block{p, seg, stream, pool, small};
      b->segment_start = true;
      stats_.reserved += seg;
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
      ++stats_.num_segments;
    }
    b->allocated = true;  // before split: the rest must not merge back into it
    split(b, size);
    b->requested = nbytes;
    live_.emplace(b->ptr, b);
    stats_.allocated += b->size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    ++stats_.num_allocs;
    return b->ptr;
  }

  // Gives the block at `ptr` back (from a storage's deleter: never throws).
  void release(void* ptr) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    Block* b = it->second;
    live_.erase(it);
    b->allocated = false;
    stats_.allocated -= b->size;
    std::vector<Event> events;
    try {
      for (const Stream& s : b->used_on) events.push_back(dev_.record(s));
      pending_.reserve(pending_.size() + events.size());
    } catch (...) {  // no event: wait for the whole device instead, then reuse
      for (const Event& e : events) dev_.destroy(e);
      events.clear();
      dev_.synchronize();
    }
    b->used_on.clear();
    for (const Event& e : events) pending_.push_back({e, b});
    b->pending = events.size();
    if (b->pending == 0) insert_free(b);
  }

  // The block at `ptr` is also used on `stream` (Tensor::record_stream): freeing it waits for
  // the work queued there by then.
  void record_stream(void* ptr, Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end())
      fail("[record_stream] {} is not a block of the CUDA caching allocator", ptr);
    Block* b = it->second;
    if (stream == b->stream) return;
    if (std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end())
      b->used_on.push_back(stream);
  }

  // Allocations on `stream` come from private pool `id` (> 0) until end_pool(stream).
  void begin_pool(Stream stream, int id) {
    std::lock_guard<std::mutex> lock(mu_);
    OF_CHECK(id > 0, "[cuda] private pool ids are positive, got {}", id);
    capture_[stream] = id;
  }
  void end_pool(Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    capture_.erase(stream);
  }
  // Gives the free segments of private pool `id` back (its graph is gone); its blocks still in
  // use go back as they are freed.
  void release_pool(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    released_.insert(id);
    release_cached(id);
  }

  // Gives every free segment of the default pool (and of released private pools) back.
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    release_cached(0);
    for (int id : released_) release_cached(id);
  }

  PoolStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }
  // Freed blocks still waiting for events on other streams (for tests and diagnostics).
  size_t pending_blocks() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    std::set<const Block*> blocks;
    for (const auto& p : pending_) blocks.insert(p.block);
    return blocks.size();
  }

 private:
  struct Block {
    void* ptr;
    size_t size;
    Stream stream;
    int pool;
    bool small;
    bool allocated = false;
    bool segment_start = false;
    size_t requested = 0;
    size_t pending = 0;     // events still to complete before reuse
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    std::vector<Stream> used_on;
  };
  struct Order {
    bool operator()(const Block* a, const Block* b) const {
      if (a->pool != b->pool) return a->pool < b->pool;
      if (a->stream != b->stream) return std::less<Stream>()(a->stream, b->stream);
      if (a->size != b->size) return a->size < b->size;
      return std::less<void*>()(a->ptr, b->ptr);
    }
  };
  struct Pending {
    Event event;
    Block* block;
  };

  int pool_of(Stream s) const {
    auto it = capture_.find(s);
    return it == capture_.end() ? 0 : it->second;
  }

  Block* take_free(int pool, Stream stream, size_t size, bool small) {
    auto& set = small ? small_free_ : large_free_;
    Block key{nullptr, size, stream, pool, small};
    auto it = set.lower_bound(&key);
    if (it == set.end() || (*it)->pool != pool || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    set.erase(it);
    return b;
  }

  void split(Block* b, size_t size) {
    const size_t rest = b->size - size;
    if (b->small ? rest < kRound : rest <= kSmallSize) return;
    Block* r = new Block{static_cast<char*>(b->ptr) + size, rest, b->stream, b->pool, b->small};
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    insert_free(r);
  }

  bool mergeable(const Block* n) const { return n && !n->allocated && n->pending == 0; }

  // Folds `second` (free, the block after `first` in its segment) into `first`.
  void absorb(Block* first, Block* second) {
    first->size += second->size;
    first->next = second->next;
    if (second->next) second->next->prev = first;
    delete second;
  }

  void insert_free(Block* b) {
    auto& set = b->small ? small_free_ : large_free_;
    if (mergeable(b->prev)) {
      Block* p = b->prev;
      set.erase(p);
      absorb(p, b);
      b = p;
    }
    if (mergeable(b->next)) {
      set.erase(b->next);
      absorb(b, b->next);
    }
    set.insert(b);
    if (b->pool != 0 && released_.count(b->pool)) release_cached(b->pool);
  }

  void process_events() {
    for (size_t i = 0; i < pending_.size();) {
      if (!dev_.done(pending_[i].event)) {
        ++i;
        continue;
      }
      Block* b = pending_[i].block;
      dev_.destroy(pending_[i].event);
      pending_.erase(pending_.begin() + std::ptrdiff_t(i));
      if (--b->pending == 0) insert_free(b);
    }
  }

  void wait_all_events() {
    for (auto& p : pending_) dev_.wait(p.event);
    process_events();
  }

  // Frees whole free segments of `pool` (-1: every pool).
  void release_cached(int pool) {
    for (auto* set : {&small_free_, &large_free_})
      for (auto it = set->begin(); it != set->end();) {
        Block* b = *it;
        if ((pool < 0 || b->pool == pool) && b->segment_start && !b->next) {
          it = set->erase(it);
          dev_.free(b->ptr);
          stats_.reserved -= b->size;
          delete b;
        } else {
          ++it;
        }
      }
  }

  D dev_;
  std::mutex mu_;
  std::set<Block*, Order> small_free_, large_free_;
  std::unordered_map<void*, Block*> live_;
  std::vector<Pending> pending_;
  std::unordered_map<Stream, int> capture_;
  std::set<int> released_;
  PoolStats stats_;
};

}  // namespace oneflow::cuda_pool
