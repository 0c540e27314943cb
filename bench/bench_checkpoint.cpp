// Checkpoint start-up (issue 25, section 4): how long loading a 256 MiB checkpoint takes with
// the file mapped (NOTE [Mapped checkpoints]) and read into owned memory, beside the file
// size, the page-in time of the mapped bytes (first touch of every page) and read(2) of the
// whole file into one buffer (the floor of any owned read). Each figure is the median of
// several runs, warm (the file in the page cache, as for a restart) and cold (the file's pages
// dropped with posix_fadvise(DONTNEED) first, as for a first start; the disk's speed then).
// Owned loads start from an emptied allocator cache, so they pay for fresh pages as a new
// process does.
//
//   build/bench/bench_checkpoint [MiB = 256] [dir = /tmp]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <oneflow/oneflow.h>

#include <cstdlib>
#include <vector>

#include "bench_util.h"

namespace ob = oneflow::bench;
namespace nn = of::nn;

namespace {

void drop_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Reads one byte of every 4 KiB page of each tensor: what the first forward pass pays.
double touch_pages(const std::vector<std::pair<std::string, of::Tensor>>& named) {
  unsigned sum = 0;
  for (const auto& [k, t] : named) {
    const auto* p = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); i += 4096) sum += p[i];
  }
  return double(sum);
}

// read(2) of the whole file into fresh memory (malloc'd per call, as an owned load's is).
double read_whole_file(const std::string& path, size_t size) {
  char* buf = static_cast<char*>(std::malloc(size));
  int fd = ::open(path.c_str(), O_RDONLY);
  size_t done = 0;
  while (done < size) {
    ssize_t r = ::read(fd, buf + done, size - done);
    if (r <= 0) break;
    done += size_t(r);
  }
  ::close(fd);
  ob::keep(buf[done / 2]);
  std::free(buf);
  return double(done);
}

struct Timing {
  double warm = 0, cold = 0;
};

// Median seconds of f over `runs` runs, with the page cache warm or dropped before each run.
template <class F> Timing measure(const std::string& path, int runs, F&& f) {
  Timing t;
  std::vector<double> warm, cold;
  f();  // warm-up: the file is now in the page cache
  for (int i = 0; i < runs; ++i) {
    of::memory::empty_cache();
    double t0 = ob::now_s();
    f();
    warm.push_back(ob::now_s() - t0);
  }
  for (int i = 0; i < runs; ++i) {
    of::memory::empty_cache();
    drop_page_cache(path);
    double t0 = ob::now_s();
    f();
    cold.push_back(ob::now_s() - t0);
  }
  return {ob::median(warm), ob::median(cold)};
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t mib = argc > 1 ? std::atoll(argv[1]) : 256;
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  const int runs = 5;
  ob::print_machine("bench_checkpoint", 1);

  // A stack of Linear(1024, 1024) layers without bias: 4 MiB of float32 each.
  const int64_t layers = std::max<int64_t>(1, mib / 4);
  auto make_model = [&] {
    nn::Sequential net;
    for (int64_t i = 0; i < layers; ++i)
      net->push_back(nn::Linear(nn::LinearOptions(1024, 1024).bias(false)));
    return net;
  };
  nn::Sequential net = make_model();
  const std::string path = dir + "/oneflow-bench-" + std::to_string(::getpid()) + ".safetensors";
  of::save(net, path);
  struct stat st;
  ::stat(path.c_str(), &st);
  const double bytes = double(st.st_size);
  fmt::print("checkpoint: {} ({:.1f} MiB, {} tensors of [1024, 1024] float32)\n", path,
             bytes / (1 << 20), layers);

  auto ms = [](double s) { return fmt::format("{:.2f} ms", s * 1e3); };
  auto rate = [&](double s) { return fmt::format("{:.2f} GB/s", bytes / s / 1e9); };

  std::vector<std::pair<std::string, of::Tensor>> keep;
  const Timing map_load = measure(path, runs, [&] { keep = of::load_tensors(path); });
  // Page-in: a fresh mapped load, then one byte of every page (timed alone).
  auto page_in = [&](bool cold) {
    std::vector<double> ts;
    for (int i = 0; i < runs; ++i) {
      if (cold) drop_page_cache(path);
      auto named = of::load_tensors(path);
      double t0 = ob::now_s();
      ob::keep(touch_pages(named));
      ts.push_back(ob::now_s() - t0);
    }
    return ob::median(ts);
  };
  const Timing touch = {page_in(false), page_in(true)};
  keep.clear();
  const Timing owned_load = measure(path, runs, [&] {
    auto named = of::load_tensors(path, of::LoadOptions().mmap(false));
    ob::keep(named.size());
  });
  const Timing plain_read =
      measure(path, runs, [&] { ob::keep(read_whole_file(path, size_t(st.st_size))); });

  nn::Sequential target = make_model();
  const Timing module_map = measure(path, runs, [&] { of::load(target, path); });
  const Timing module_owned =
      measure(path, runs, [&] { of::load(target, path, of::LoadOptions().mmap(false)); });
  std::remove(path.c_str());

  ob::Table t(fmt::format("Checkpoint start-up: {:.0f} MiB file, {} tensors (median of {} runs)",
                          bytes / (1 << 20), layers, runs),
              {"cold (page cache dropped)"});
  auto both = [&](const Timing& a, const Timing& b) {  // a / b, warm and cold
    return std::pair{a.warm / b.warm, a.cold / b.cold};
  };
  t.row({"load_tensors, mmap (default): the load", ms(map_load.warm), "-", "-", "-", "-",
         ms(map_load.cold)});
  // Warm, a touch maps pages already in memory (no bytes move): only the cold figure is a rate.
  t.row({"  + first touch of every page (page-in)", ms(touch.warm), "-", "-", "-", "-",
         ms(touch.cold) + " (" + rate(touch.cold) + ")"});
  t.row({"load_tensors, owned (mmap(false))",
         ms(owned_load.warm) + " (" + rate(owned_load.warm) + ")",
         "read(2), fresh memory " + ms(plain_read.warm),
         ob::ratio_str(owned_load.warm / plain_read.warm), "-", "-",
         ms(owned_load.cold) + " / read(2) " + ms(plain_read.cold)});
  const Timing mapped_total = {map_load.warm + touch.warm, map_load.cold + touch.cold};
  auto [ow, oc] = both(owned_load, mapped_total);
  t.row({"owned load / (mmap load + page-in)", ms(mapped_total.warm), ms(owned_load.warm),
         ob::ratio_str(ow), "-", "-", ob::ratio_str(oc)});
  auto [mw, mc] = both(module_owned, module_map);
  t.row({"of::load(module), mmap (copy_ into parameters)", ms(module_map.warm),
         "owned " + ms(module_owned.warm), ob::ratio_str(mw), "-", "-",
         ms(module_map.cold) + " / owned " + ms(module_owned.cold) + ": " + ob::ratio_str(mc)});
  t.print();
  return 0;
}
