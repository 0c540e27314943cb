// test_c10d.cpp: the distributed samplers' index sets (libtorch's, NOTE [Distributed samplers])
// and the c10d process-group API in a world of one process: values, Work, both pointer
// spellings and the error paths. The multi-rank cases are in global_worker.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>

#include <oneflow/c10d.h>
#include <oneflow/oneflow.h>

namespace of = oneflow;
namespace samplers = oneflow::data::samplers;

namespace {

// Every index a sampler hands out in one pass, batch by batch.
template <class S> std::vector<size_t> drain(S& s, size_t batch_size = 3) {
  std::vector<size_t> all;
  while (auto b = s.next(batch_size)) {
    CHECK(b->size() <= batch_size);
    all.insert(all.end(), b->begin(), b->end());
  }
  return all;
}

// How many times each index occurs over the replicas' passes.
template <class S>
std::map<size_t, int> coverage(size_t size, size_t replicas, bool dup, size_t epoch = 0) {
  std::map<size_t, int> n;
  for (size_t r = 0; r < replicas; ++r) {
    S s(size, replicas, r, dup);
    s.set_epoch(epoch);
    s.reset();
    for (size_t i : drain(s)) ++n[i];
  }
  return n;
}

std::vector<size_t> iota(size_t n, size_t from = 0) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

}  // namespace

TEST_CASE("DistributedSequentialSampler: libtorch's blocks, with and without duplicates") {
  // without duplicates: floor(10 / 3) = 3 each, index 9 left out
  for (size_t r = 0; r < 3; ++r) {
    samplers::DistributedSequentialSampler s(10, 3, r, false);
    CHECK(drain(s) == iota(3, 3 * r));
  }
  // with duplicates: ceil(10 / 3) = 4 each, the last block wraps to the start
  samplers::DistributedSequentialSampler last(10, 3, 2);
  CHECK(drain(last, 2) == std::vector<size_t>{8, 9, 0, 1});
  CHECK(!last.next(2).has_value());
  last.reset();
  CHECK(last.index() == 8);
  CHECK(drain(last) == std::vector<size_t>{8, 9, 0, 1});
  auto n = coverage<samplers::DistributedSequentialSampler>(12, 4, false);
  CHECK(n.size() == 12);
  for (auto [i, c] : n) CHECK(c == 1);
  // reset to another size re-blocks
  last.reset(20);
  CHECK(drain(last) == std::vector<size_t>{14, 15, 16, 17, 18, 19, 0});
  // defaults: one replica, every index in order
  samplers::DistributedSequentialSampler one(5);
  CHECK(drain(one) == iota(5));
  CHECK(one.epoch() == 0);
}

TEST_CASE("DistributedRandomSampler: a permutation seeded by the epoch, split into blocks") {
  // allow_duplicates = false: every index exactly once over the replicas (size divisible)
  for (size_t replicas : {1, 2, 3, 4}) {
    CAPTURE(replicas);
    auto n = coverage<samplers::DistributedRandomSampler>(12, replicas, false, 5);
    CHECK(n.size() == 12);
    for (auto [i, c] : n) CHECK(c == 1);
  }
  // not divisible: floor(10 / 4) = 2 each; as in libtorch the kept indices are 0..7, shuffled
  auto cut = coverage<samplers::DistributedRandomSampler>(10, 4, false);
  CHECK(cut.size() == 8);
  CHECK(cut.rbegin()->first == 7);
  // with duplicates: ceil(10 / 4) = 3 each, indices 0 and 1 twice (the padding), others once
  auto pad = coverage<samplers::DistributedRandomSampler>(10, 4, true);
  CHECK(pad.size() == 10);
  for (auto [i, c] : pad) CHECK(c == (i < 2 ? 2 : 1));
  // libtorch's numbers: std::shuffle of 0..n-1 with std::mt19937(epoch), rank r's block
  std::vector<size_t> expected = iota(12);
  std::mt19937 gen(3);
  std::shuffle(expected.begin(), expected.end(), gen);
  samplers::DistributedRandomSampler s(12, 3, 1, false);
  s.set_epoch(3);
  CHECK(s.epoch() == 3);
  s.reset();
  CHECK(drain(s, 5) == std::vector<size_t>(expected.begin() + 4, expected.begin() + 8));
  // the epoch changes the order; the same epoch gives the same order (every rank agrees)
  samplers::DistributedRandomSampler a(100), b(100);
  const std::vector<size_t> e0 = drain(a);
  CHECK(drain(b) == e0);
  a.set_epoch(1);
  a.reset();
  const std::vector<size_t> e1 = drain(a);
  CHECK(e1 != e0);
  std::vector<size_t> sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(100));
  // set_epoch takes effect at the next reset (libtorch)
  b.set_epoch(1);
  b.reset();
  CHECK(drain(b) == e1);
  b.reset(7);
  CHECK(drain(b).size() == 7);
}

TEST_CASE("distributed samplers drive make_data_loader; errors") {
  of::data::datasets::TensorDataset ds(of::arange(10, of::kFloat32).reshape({10, 1}));
  auto loader = of::data::make_data_loader(
      ds.map(of::data::transforms::Stack<of::data::TensorExample>()),
      samplers::DistributedSequentialSampler(10, 2, 1, false), of::data::DataLoaderOptions(2));
  std::vector<float> seen;
  for (auto& batch : *loader)
    for (float v : batch.data.flatten().to_vector<float>()) seen.push_back(v);
  CHECK(seen == std::vector<float>{5, 6, 7, 8, 9});
  // the make_data_loader<Sampler>(dataset, options) spelling: one replica, every row
  auto whole = of::data::make_data_loader<samplers::DistributedRandomSampler>(
      ds.map(of::data::transforms::Stack<of::data::TensorExample>()), 4);
  size_t rows = 0;
  for (auto& batch : *whole) rows += size_t(batch.data.size(0));
  CHECK(rows == 10);
  CHECK_THROWS_WITH_AS(samplers::DistributedRandomSampler(10, 2, 2), doctest::Contains("rank 2"),
                       of::Error);
  CHECK_THROWS_WITH_AS(samplers::DistributedSequentialSampler(10, 0, 0),
                       doctest::Contains("num_replicas"), of::Error);
}

TEST_CASE("c10d: a process group of one process: values, Work, both pointer spellings") {
  // libtorch 1.13's spelling and the older shared_ptr one
  c10::intrusive_ptr<c10d::ProcessGroupMPI> pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  std::shared_ptr<c10d::ProcessGroup> base = c10d::ProcessGroupMPI::createProcessGroupMPI();
  c10::intrusive_ptr<c10d::ProcessGroup> back = base;
  REQUIRE(pg.defined());
  CHECK(pg->getRank() == 0);
  CHECK(pg->getSize() == 1);
  CHECK(back->getBackendName() == "mpi");
  for (of::ScalarType dt : {of::kFloat32, of::kFloat64, of::kInt64, of::kFloat16}) {
    CAPTURE(of::dtype_name(dt));
    of::Tensor t = of::arange(6, of::kFloat64).to(dt).reshape({2, 3});
    std::vector<of::Tensor> v{t};
    c10::intrusive_ptr<c10d::Work> w = pg->allreduce(v);
    CHECK(w->wait());
    CHECK(w->isCompleted());
    CHECK(w->isSuccess());
    CHECK(w->retrieveOpType() == c10d::OpType::ALLREDUCE);
    CHECK(t.dtype() == dt);
    CHECK(t.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
    for (auto op : {c10d::ReduceOp::MIN, c10d::ReduceOp::MAX, c10d::ReduceOp::PRODUCT}) {
      c10d::AllreduceOptions o;
      o.reduceOp = op;
      pg->allreduce(v, o)->wait();
      CHECK(t.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
    }
  }
  of::Tensor x = of::full({3}, 2.0);
  std::vector<of::Tensor> xs{x};
  std::shared_ptr<c10d::ProcessGroup::Work> bw = base->broadcast(xs);
  CHECK(bw->wait());
  CHECK(bw->result()[0].to_vector<float>() == std::vector<float>{2, 2, 2});
  std::vector<std::vector<of::Tensor>> gathered{{of::zeros({3})}};
  pg->allgather(gathered, xs)->wait();
  CHECK(gathered[0][0].to_vector<float>() == std::vector<float>{2, 2, 2});
  std::vector<of::Tensor> out{of::zeros({3})};
  std::vector<std::vector<of::Tensor>> ins{{of::full({3}, 4.0)}};
  pg->reduce_scatter(out, ins)->wait();
  CHECK(out[0].to_vector<float>() == std::vector<float>{4, 4, 4});
  pg->scatter(out, ins)->wait();
  CHECK(out[0].to_vector<float>() == std::vector<float>{4, 4, 4});
  pg->gather(gathered, xs)->wait();
  std::vector<of::Tensor> a2a_out{of::zeros({2})}, a2a_in{of::full({2}, 7.0)};
  pg->alltoall(a2a_out, a2a_in)->wait();
  CHECK(a2a_out[0].to_vector<float>() == std::vector<float>{7, 7});
  of::Tensor buf = of::zeros({3});
  pg->_allgather_base(buf, x)->wait();
  CHECK(buf.to_vector<float>() == std::vector<float>{2, 2, 2});
  pg->reduce(xs)->wait();
  CHECK(pg->barrier()->wait());
  auto sub = c10d::ProcessGroupMPI::createProcessGroupMPI({0});
  REQUIRE(sub != nullptr);
  CHECK(sub->getSize() == 1);
  // the writes bump the version counter (autograd sees them)
  const uint32_t v0 = x._version();
  pg->allreduce(xs)->wait();
  CHECK(x._version() > v0);
}

TEST_CASE("c10d: errors name the op and the offending tensors") {
  auto pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  std::vector<of::Tensor> two{of::zeros({2}), of::zeros({2})};
  CHECK_THROWS_WITH_AS(pg->allreduce(two), doctest::Contains("exactly one tensor"), of::Error);
  std::vector<of::Tensor> strided{of::zeros({3, 4}).t()};
  CHECK_THROWS_WITH_AS(pg->allreduce(strided), doctest::Contains("must be contiguous"), of::Error);
  std::vector<of::Tensor> flags{of::zeros({2}, of::kBool)};
  CHECK_THROWS_WITH_AS(pg->allreduce(flags), doctest::Contains("bool"), of::Error);
  std::vector<of::Tensor> one{of::zeros({2})};
  c10d::AllreduceOptions avg;
  avg.reduceOp = c10d::ReduceOp::AVG;
  CHECK_THROWS_WITH_AS(pg->allreduce(one, avg), doctest::Contains("ReduceOp AVG"), of::Error);
  c10d::BroadcastOptions far;
  far.rootRank = 3;
  CHECK_THROWS_WITH_AS(pg->broadcast(one, far), doctest::Contains("rank 3 is out of range"),
                       of::Error);
  std::vector<std::vector<of::Tensor>> wrong{{of::zeros({3})}};
  CHECK_THROWS_WITH_AS(pg->allgather(wrong, one),
                       doctest::Contains("outputTensors[0][0] is float32 (3,), but inputTensors[0] "
                                         "is float32 (2,)"),
                       of::Error);
  std::vector<std::vector<of::Tensor>> doubles{{of::zeros({2}, of::kFloat64)}};
  CHECK_THROWS_WITH_AS(pg->reduce_scatter(one, doubles), doctest::Contains("float64 (2,)"),
                       of::Error);
  std::vector<std::vector<of::Tensor>> too_many{{of::zeros({2}), of::zeros({2})}};
  CHECK_THROWS_WITH_AS(pg->reduce_scatter(one, too_many),
                       doctest::Contains("one tensor per rank (1), got 2"), of::Error);
  of::Placement pl("cpu", {0});
  std::vector<of::Tensor> global{of::zeros({2}).to_global(pl, of::sbp::broadcast())};
  CHECK_THROWS_WITH_AS(pg->allreduce(global), doctest::Contains("global tensor"), of::Error);
  CHECK_THROWS_WITH_AS(c10d::ProcessGroupMPI::createProcessGroupMPI({1}),
                       doctest::Contains("outside the world"), of::Error);
  // a process group that implements nothing says so
  struct Bare : c10d::ProcessGroup {
    Bare() : c10d::ProcessGroup(0, 1) {}
  } bare;
  CHECK_THROWS_WITH_AS(bare.barrier(), doctest::Contains("does not support barrier"), of::Error);
}
