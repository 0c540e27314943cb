// cpu_only_probe.cpp: a small CPU program run by tests/test_cuda.cpp in its own process
// (NOTE [CUDA module]): what a CPU-only program pays for CUDA at start, and what a CUDA request
// says when the CUDA libraries cannot be loaded.
//   cpu_only_probe cpu   trains a few steps on the CPU, then prints its start RSS and the CUDA
//                         libraries mapped into the process (there must be none)
//   cpu_only_probe ask   asks for a CUDA tensor and prints the error (or "ok")
#include <cstdio>
#include <fstream>
#include <string>

#include <oneflow/oneflow.h>

namespace {

long rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string l; std::getline(f, l);)
    if (l.rfind("VmRSS:", 0) == 0) return std::stol(l.substr(6));
  return -1;
}

// Mapped files whose name says CUDA (libcudart, libcublas, libcuda, the module itself).
std::string cuda_mappings() {
  std::ifstream f("/proc/self/maps");
  std::string found;
  for (std::string l; std::getline(f, l);) {
    const size_t slash = l.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = l.substr(slash);
    const std::string name = path.substr(path.rfind('/') + 1);
    if ((name.find("cuda") != std::string::npos || name.find("cublas") != std::string::npos) &&
        found.find(path) == std::string::npos)
      found += path + " ";
  }
  return found;
}

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const long start = rss_kib();
  const std::string mode = argc > 1 ? argv[1] : "cpu";
  std::printf("start_rss_kib %ld\nsanitized %d\n", start, int(sanitized()));
  if (mode == "cpu") {
    of::manual_seed(0);
    of::nn::Linear lin(8, 4);
    of::optim::SGD opt(lin->parameters(), of::optim::SGDOptions(0.1));
    const of::Tensor x = of::randn({16, 8}), y = of::randn({16, 4});
    double first = 0, last = 0;
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      of::Tensor loss = of::mse_loss(lin(x), y);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    std::printf("trained %d\n", int(last < first));
    std::printf("cuda_mapped [%s]\n", cuda_mappings().c_str());
    return 0;
  }
  try {
    of::zeros({2}).to(of::Device("cuda:0"));
    std::printf("ok\n");
  } catch (const of::Error& e) { std::printf("error %s\n", e.what()); }
  return 0;
}
