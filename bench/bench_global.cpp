// bench_global: boxing against the raw MPI collective on the same buffers, and the cost of
// dispatching an op on global tensors. Run under mpirun (the limit is the MPI call itself):
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2
//   ./build/bench/bench_global
// Each row times both sides in the same run, interleaved, median of the repetitions, and
// prints rank 0's figures (every rank does the same work).
#include <mpi.h>

#include <oneflow/oneflow.h>

#include "bench_util.h"

namespace of = oneflow;
using of::bench::median;
using of::bench::now_s;

namespace {

// Median seconds of `reps` runs of f, after a barrier each (both sides alike).
double time_it(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  return median(t);
}

}  // namespace

int main() {
  of::distributed::init();  // initializes MPI through liboneflow_mpi.so
  of::set_num_threads(1);
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  of::Placement pl = of::Placement::all("cpu");
  if (rank == 0)
    std::printf(
        "bench_global: %d ranks (one thread each), float32, median of the repetitions; "
        "the limit is the raw MPI call on the same buffers\n\n"
        "%-12s %10s %12s %12s %8s %12s\n",
        p, "boxing", "bytes", "oneflow us", "MPI us", "ratio", "added us");
  for (int64_t bytes : {int64_t(1) << 10, int64_t(1) << 14, int64_t(1) << 18, int64_t(1) << 20,
                        int64_t(1) << 22, int64_t(1) << 24}) {
    const int64_t n = bytes / 4;
    const int64_t rows = p * 64, cols = n / rows;  // divisible: both sides move the same bytes
    const int reps = bytes >= (1 << 22) ? 15 : 60;
    of::Tensor full = of::randn({rows, cols});
    std::vector<float> buf(size_t(rows * cols)), out(size_t(rows * cols));
    struct Row {
      const char* name;
      of::NdSbp from, to;
      std::function<void()> mpi;
    };
    const int cnt = int(rows * cols);
    std::vector<Row> table = {
        {"P->B",
         {of::sbp::partial_sum()},
         {of::sbp::broadcast()},
         [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
        // the same conversion against the out-of-place call: the boxing keeps its input (a
        // global tensor is not overwritten by converting it), as MPI_Allreduce(send, recv) does
        {"P->B (oop)",
         {of::sbp::partial_sum()},
         {of::sbp::broadcast()},
         [&] { MPI_Allreduce(buf.data(), out.data(), cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
        {"S(0)->B",
         {of::sbp::split(0)},
         {of::sbp::broadcast()},
         [&] {
           MPI_Allgather(buf.data(), cnt / p, MPI_FLOAT, out.data(), cnt / p, MPI_FLOAT,
                         MPI_COMM_WORLD);
         }},
        {"P->S(0)",
         {of::sbp::partial_sum()},
         {of::sbp::split(0)},
         [&] {
           MPI_Reduce_scatter_block(buf.data(), out.data(), cnt / p, MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD);
         }},
        {"S(0)->S(1)",
         {of::sbp::split(0)},
         {of::sbp::split(1)},
         [&] {
           MPI_Alltoall(buf.data(), cnt / p / p, MPI_FLOAT, out.data(), cnt / p / p, MPI_FLOAT,
                        MPI_COMM_WORLD);
         }},
    };
    for (auto& row : table) {
      of::Tensor x = full.to_global(pl, of::sbp::broadcast()).to_global(pl, row.from);
      of::Tensor y;
      std::vector<double> ours, theirs;
      for (int k = 0; k < 3; ++k) {  // interleave the sides
        // (the previous result is dropped first, so the conversion writes into a recycled
        // block as the raw call writes into its one `out`: the same cache footprint)
        ours.push_back(time_it(reps / 3, [&] {
          y = of::Tensor();
          y = x.to_global(pl, row.to);
        }));
        theirs.push_back(time_it(reps / 3, row.mpi));
      }
      const double a = median(ours), b = median(theirs);
      if (rank == 0)
        std::printf("%-12s %10lld %12.1f %12.1f %7.2fx %12.1f\n", row.name, (long long)bytes,
                    a * 1e6, b * 1e6, a / b, (a - b) * 1e6);
    }
  }
  // dispatch: a + b on small global tensors against the same op on the local pieces
  {
    of::Tensor a = of::randn({64, 16}, pl, of::sbp::split(0)),
               b = of::randn({64, 16}, pl, of::sbp::split(0));
    of::Tensor la = a.to_local(), lb = b.to_local();
    of::Tensor c;
    const int iters = 20000;
    std::vector<double> g, l;
    for (int k = 0; k < 5; ++k) {
      double t0 = now_s();
      for (int i = 0; i < iters; ++i) c = a + b;
      g.push_back((now_s() - t0) / iters);
      t0 = now_s();
      for (int i = 0; i < iters; ++i) c = la + lb;
      l.push_back((now_s() - t0) / iters);
    }
    if (rank == 0)
      std::printf(
          "\nglobal op dispatch (add, S(0) x S(0), 64x16 float32): %.2f us vs %.2f us "
          "local: %.2f us added per op\n",
          median(g) * 1e6, median(l) * 1e6, (median(g) - median(l)) * 1e6);
  }
  return 0;
}
