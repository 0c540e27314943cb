// test_data.cpp: IDX reading (plain and gzip, made by the test), MNIST layout, the DataLoader
// (coverage, seeded shuffling, drop_last, prefetching, errors) and character-level text.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "harness.h"

namespace of = oneflow;
namespace data = oneflow::data;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("oneflow_data_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {'\0', '\0', char(type), char(dims.size())};
  for (uint32_t d : dims) {
    s.push_back(char(d >> 24));
    s.push_back(char(d >> 16));
    s.push_back(char(d >> 8));
    s.push_back(char(d));
  }
  return s + payload;
}

void write_file(const std::string& path, const std::string& bytes, bool gz = false) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

}  // namespace

TEST_CASE("data: read_idx for uint8 / int32 / float32, plain and gzip; bad files rejected") {
  TempDir dir;
  std::string pixels;
  for (int i = 0; i < 2 * 3 * 4; ++i) pixels.push_back(char(i * 10));
  write_file(dir.file("a.idx"), idx_bytes(0x08, {2, 3, 4}, pixels));
  write_file(dir.file("a.idx.gz"), idx_bytes(0x08, {2, 3, 4}, pixels), true);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    of::Tensor t = data::read_idx(dir.file(name));
    CHECK(t.dtype() == of::kUInt8);
    CHECK(t.sizes().vec() == std::vector<int64_t>{2, 3, 4});
    CHECK(t.to(of::kInt64).to_vector<int64_t>()[5] == 50);
    CHECK(t.to(of::kInt64).to_vector<int64_t>()[23] == 230);
  }
  // big-endian int32 and float32
  write_file(dir.file("i.idx"), idx_bytes(0x0C, {2}, std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8)));
  CHECK(data::read_idx(dir.file("i.idx")).to_vector<int32_t>() == std::vector<int32_t>{258, -2});
  write_file(dir.file("f.idx"), idx_bytes(0x0D, {1}, std::string("\x3f\xc0\x00\x00", 4)));  // 1.5f
  CHECK(data::read_idx(dir.file("f.idx")).to_vector<float>() == std::vector<float>{1.5f});
  // errors name the path and the problem
  write_file(dir.file("short.idx"), idx_bytes(0x08, {2, 3, 4}, pixels.substr(0, 20)));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("short.idx")); },
                        {"[read_idx]", "short.idx", "truncated", "24", "20"}));
  write_file(dir.file("magic.idx"), "PK\x03\x04 not an idx file");
  CHECK(th::throws_with([&] { data::read_idx(dir.file("magic.idx")); }, {"[read_idx]", "not an IDX"}));
  write_file(dir.file("type.idx"), idx_bytes(0x07, {1}, "x"));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("type.idx")); }, {"[read_idx]", "0x07"}));
  write_file(dir.file("bad.gz"), "this is not gzip at all, but long enough to look like data");
  CHECK(th::throws_with([&] { data::read_idx(dir.file("bad.gz")); }, {"[read_idx]", "bad.gz"}));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("missing.idx")); }, {"[read_idx]", "missing.idx"}));
}

TEST_CASE("data: MNIST layout from a small directory; missing files named") {
  TempDir dir;
  std::string img(size_t(5 * 28 * 28), '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i % 256);
  write_file(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {5, 28, 28}, img), true);
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {5}, std::string("\x03\x01\x04\x01\x05", 5)));
  data::MNIST test(dir.path.string(), data::MNIST::Mode::kTest);
  CHECK(test.size() == 5);
  CHECK(test.data().sizes().vec() == std::vector<int64_t>{5, 1, 28, 28});
  CHECK(test.data().dtype() == of::kFloat32);
  CHECK(test.data().flatten().to_vector<float>()[255] == doctest::Approx(1.0f));
  CHECK(test.targets().to_vector<int64_t>() == std::vector<int64_t>{3, 1, 4, 1, 5});
  data::Example<> e = test.get(2);
  CHECK(e.target.item<int64_t>() == 4);
  CHECK(th::throws_with([&] { data::MNIST train(dir.path.string()); },
                        {"[MNIST]", "train-images-idx3-ubyte"}));
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes(0x08, {2, 28, 28}, img.substr(0, 2 * 784)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes(0x08, {3}, "abc"));
  CHECK(th::throws_with([&] { data::MNIST train(dir.path.string()); }, {"[MNIST]", "2 labels"}));
}

TEST_CASE("data: DataLoader covers every sample once, shuffles reproducibly, drop_last, prefetch") {
  const int64_t n = 103;
  auto ds = std::make_shared<data::TensorDataset>(of::arange(n, of::kFloat32).unsqueeze(1),
                                                  of::arange(n, of::kInt64));
  for (bool prefetch : {false, true})
    for (bool shuffle : {false, true}) {
      data::DataLoader loader(ds, data::DataLoaderOptions(10).shuffle(shuffle).prefetch(prefetch).seed(7));
      CHECK(loader.size() == 11);
      std::vector<int64_t> seen;
      size_t batches = 0;
      for (auto& b : loader) {
        ++batches;
        CHECK(b.data.size(0) == b.target.size(0));
        CHECK(b.data.squeeze(1).to(of::kInt64).to_vector<int64_t>() == b.target.to_vector<int64_t>());
        for (int64_t v : b.target.to_vector<int64_t>()) seen.push_back(v);
      }
      CHECK(batches == 11);
      std::vector<int64_t> sorted = seen;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == of::arange(n, of::kInt64).to_vector<int64_t>());
      CHECK((seen == sorted) == !shuffle);
    }
  // same seed: same order (prefetch or not); next epoch: a different order
  auto order = [&](uint64_t seed, bool prefetch, int epochs) {
    data::DataLoader loader(ds, data::DataLoaderOptions(16).shuffle(true).seed(seed).prefetch(prefetch));
    std::vector<int64_t> out;
    for (int e = 0; e < epochs; ++e) {
      out.clear();
      for (auto& b : loader)
        for (int64_t v : b.target.to_vector<int64_t>()) out.push_back(v);
    }
    return out;
  };
  CHECK(order(3, true, 1) == order(3, false, 1));
  CHECK(order(3, true, 1) != order(4, true, 1));
  CHECK(order(3, true, 1) != order(3, true, 2));
  data::DataLoader dl(ds, data::DataLoaderOptions(10).drop_last(true));
  size_t count = 0;
  for (auto& b : dl) {
    CHECK(b.target.size(0) == 10);
    ++count;
  }
  CHECK(count == 10);
  // an early break stops the worker cleanly; the next loop starts a new epoch
  data::DataLoader early(ds, data::DataLoaderOptions(5));
  for (auto& b : early) {
    (void)b;
    break;
  }
  size_t again = 0;
  for (auto& b : early) again += size_t(b.target.size(0));
  CHECK(again == size_t(n));
  CHECK(th::throws_with([&] { data::DataLoader bad(ds, data::DataLoaderOptions(0)); },
                        {"[DataLoader]", "batch_size"}));
}

TEST_CASE("data: errors inside the worker reach the consumer") {
  struct Failing : data::Dataset {
    size_t size() const override { return 8; }
    data::Example<> get(size_t i) override {
      if (i == 5) oneflow::fail("[Failing] sample {} is broken", i);
      return {of::full({1}, double(i)), of::full({}, int64_t(i), of::kInt64)};
    }
  };
  data::DataLoader loader(std::make_shared<Failing>(), data::DataLoaderOptions(2));
  CHECK(th::throws_with([&] {
    for (auto& b : loader) (void)b;
  }, {"[Failing]", "sample 5"}));
}

TEST_CASE("data: character vocabulary and windows") {
  const std::string text = "hello world, hello text";
  data::CharVocab vocab(text);
  CHECK(vocab.size() == 11);  // " ,dehlortwx"
  of::Tensor ids = vocab.encode("hello");
  CHECK(vocab.decode(ids) == "hello");
  CHECK(th::throws_with([&] { vocab.encode("hi!"); }, {"[CharVocab]", "position 1"}));
  data::CharDataset ds(text, 4);
  CHECK(ds.size() == text.size() - 4);
  data::Example<> e = ds.get(6);
  CHECK(ds.vocab().decode(e.data) == "worl");
  CHECK(ds.vocab().decode(e.target) == "orld");
  data::Example<> b = ds.get_batch({0, 6});
  CHECK(b.data.sizes().vec() == std::vector<int64_t>{2, 4});
  CHECK(ds.vocab().decode(b.target.select(0, 0)) == "ello");
  CHECK(th::throws_with([&] { data::CharDataset tiny("abc", 3); }, {"[CharDataset]", "block_size"}));
}

TEST_CASE("data: libtorch-style pipeline (datasets::MNIST.map(Normalize).map(Stack), make_data_loader)") {
  TempDir dir;
  std::string img(size_t(3 * 28 * 28), '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i % 7 * 30);
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes(0x08, {3, 28, 28}, img));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes(0x08, {3}, std::string("\x01\x02\x03", 3)));
  auto ds = data::datasets::MNIST(dir.path.string())
                .map(data::transforms::Normalize<>(0.5, 0.25))
                .map(data::transforms::Stack<>());
  CHECK(ds.size().value() == 3);
  const float expect = (30.0f / 255.0f - 0.5f) / 0.25f;  // pixel 1 holds 30
  data::Example<> first = ds.get_batch(std::vector<size_t>{0});
  CHECK(first.data.sizes().vec() == std::vector<int64_t>{1, 1, 28, 28});
  CHECK(first.data.flatten().to_vector<float>()[1] == doctest::Approx(expect));
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(std::move(ds), 2);
  std::vector<int64_t> targets;
  for (auto& b : *loader)
    for (int64_t t : b.target.to_vector<int64_t>()) targets.push_back(t);
  CHECK(targets == std::vector<int64_t>{1, 2, 3});
  CHECK(th::throws_with([&] { data::datasets::MNIST(dir.path.string()).map(data::transforms::Normalize<>(0, 0)); },
                        {"[Normalize]"}));
}
