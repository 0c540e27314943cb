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
#include <sstream>
#include <thread>

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
  write_file(dir.file("i.idx"),
             idx_bytes(0x0C, {2}, std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8)));
  CHECK(data::read_idx(dir.file("i.idx")).to_vector<int32_t>() == std::vector<int32_t>{258, -2});
  write_file(dir.file("f.idx"), idx_bytes(0x0D, {1}, std::string("\x3f\xc0\x00\x00", 4)));  // 1.5f
  CHECK(data::read_idx(dir.file("f.idx")).to_vector<float>() == std::vector<float>{1.5f});
  // errors name the path and the problem
  write_file(dir.file("short.idx"), idx_bytes(0x08, {2, 3, 4}, pixels.substr(0, 20)));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("short.idx")); },
                        {"[read_idx]", "short.idx", "truncated", "24", "20"}));
  write_file(dir.file("magic.idx"), "PK\x03\x04 not an idx file");
  CHECK(th::throws_with([&] { data::read_idx(dir.file("magic.idx")); },
                        {"[read_idx]", "not an IDX"}));
  write_file(dir.file("type.idx"), idx_bytes(0x07, {1}, "x"));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("type.idx")); }, {"[read_idx]", "0x07"}));
  write_file(dir.file("bad.gz"), "this is not gzip at all, but long enough to look like data");
  CHECK(th::throws_with([&] { data::read_idx(dir.file("bad.gz")); }, {"[read_idx]", "bad.gz"}));
  CHECK(th::throws_with([&] { data::read_idx(dir.file("missing.idx")); },
                        {"[read_idx]", "missing.idx"}));
}

TEST_CASE("data: MNIST layout from a small directory; missing files named") {
  TempDir dir;
  std::string img(size_t(5 * 28 * 28), '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i % 256);
  write_file(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {5, 28, 28}, img), true);
  write_file(dir.file("t10k-labels-idx1-ubyte"),
             idx_bytes(0x08, {5}, std::string("\x03\x01\x04\x01\x05", 5)));
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
  write_file(dir.file("train-images-idx3-ubyte"),
             idx_bytes(0x08, {2, 28, 28}, img.substr(0, 2 * 784)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes(0x08, {3}, "abc"));
  CHECK(th::throws_with([&] { data::MNIST train(dir.path.string()); }, {"[MNIST]", "2 labels"}));
}

TEST_CASE("data: DataLoader covers every sample once, shuffles reproducibly, drop_last, prefetch") {
  const int64_t n = 103;
  auto ds = std::make_shared<data::TensorDataset>(of::arange(n, of::kFloat32).unsqueeze(1),
                                                  of::arange(n, of::kInt64));
  for (bool prefetch : {false, true})
    for (bool shuffle : {false, true}) {
      data::DataLoader loader(
          ds, data::DataLoaderOptions(10).shuffle(shuffle).prefetch(prefetch).seed(7));
      CHECK(loader.size() == 11);
      std::vector<int64_t> seen;
      size_t batches = 0;
      for (auto& b : loader) {
        ++batches;
        CHECK(b.data.size(0) == b.target.size(0));
        CHECK(b.data.squeeze(1).to(of::kInt64).to_vector<int64_t>() ==
              b.target.to_vector<int64_t>());
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
    data::DataLoader loader(
        ds, data::DataLoaderOptions(16).shuffle(true).seed(seed).prefetch(prefetch));
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
  CHECK(th::throws_with(
      [&] {
        for (auto& b : loader) (void)b;
      },
      {"[Failing]", "sample 5"}));
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
  CHECK(
      th::throws_with([&] { data::CharDataset tiny("abc", 3); }, {"[CharDataset]", "block_size"}));
}

TEST_CASE(
    "data: libtorch-style pipeline (datasets::MNIST.map(Normalize).map(Stack), make_data_loader)") {
  TempDir dir;
  std::string img(size_t(3 * 28 * 28), '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i % 7 * 30);
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes(0x08, {3, 28, 28}, img));
  write_file(dir.file("train-labels-idx1-ubyte"),
             idx_bytes(0x08, {3}, std::string("\x01\x02\x03", 3)));
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
  CHECK(th::throws_with(
      [&] { data::datasets::MNIST(dir.path.string()).map(data::transforms::Normalize<>(0, 0)); },
      {"[Normalize]"}));
}

namespace {

// The libtorch tutorial's custom dataset, in memory: each CSV line is "label,p0,...,p11", an
// image of 3 channels x 2 x 2 pixels.
struct CsvImages : data::datasets::Dataset<CsvImages> {
  explicit CsvImages(const std::string& csv) {
    std::istringstream lines(csv);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream cells(line);
      std::string cell;
      std::getline(cells, cell, ',');
      labels.push_back(std::stoll(cell));
      std::vector<float> px;
      while (std::getline(cells, cell, ',')) px.push_back(std::stof(cell));
      images.push_back(of::tensor(px, {3, 2, 2}));
    }
  }
  data::Example<> get(size_t index) override {
    return {images.at(index), of::full({}, labels.at(index), of::kInt64)};
  }
  of::optional<size_t> size() const override { return images.size(); }
  std::vector<of::Tensor> images;
  std::vector<int64_t> labels;
};

std::string csv_rows(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += std::to_string(i % 4);
    for (int p = 0; p < 12; ++p) s += "," + std::to_string(i * 12 + p);
    s += "\n";
  }
  return s;
}

struct Square : data::transforms::TensorTransform<> {
  of::Tensor operator()(of::Tensor x) override { return x * x; }
};

}  // namespace

TEST_CASE(
    "data: a custom CRTP dataset, map chains, Normalize per channel, Lambda, TensorTransform") {
  CsvImages ds(csv_rows(5));
  CHECK(ds.size().value() == 5);
  std::vector<data::Example<>> batch = ds.get_batch({3, 1});
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].target.item<int64_t>() == 3);
  CHECK(batch[1].data.flatten().to_vector<float>()[0] == 12.0f);

  const std::vector<double> mean = {1.0, 2.0, 3.0}, stddev = {0.5, 2.0, 4.0};
  auto mapped = ds.map(data::transforms::Lambda<data::Example<>>([](data::Example<> e) {
                    return data::Example<>(e.data + 1.0, e.target * 10);
                  }))
                    .map(data::transforms::Normalize<>(mean, stddev))
                    .map(data::transforms::Stack<>());
  static_assert(std::is_same_v<decltype(mapped)::BatchType, data::Example<>>);
  CHECK(mapped.size().value() == 5);
  data::Example<> b = mapped.get_batch({4, 0});
  CHECK(b.data.sizes().vec() == std::vector<int64_t>{2, 3, 2, 2});
  CHECK(b.target.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  std::vector<float> got = b.data.flatten().to_vector<float>();
  const int rows[2] = {4, 0};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 4; ++p) {
        const double x = rows[r] * 12 + c * 4 + p + 1.0;
        CHECK(got[size_t(r * 12 + c * 4 + p)] == doctest::Approx((x - mean[c]) / stddev[c]));
      }
  // one scalar for all channels; a user TensorTransform and a TensorLambda
  data::Example<> s = ds.map(data::transforms::Normalize<>(2.0, 4.0))
                          .map(Square())
                          .map(data::transforms::TensorLambda<>([](of::Tensor x) { return x - 1; }))
                          .map(data::transforms::Stack<>())
                          .get_batch({1});
  CHECK(s.data.flatten().to_vector<float>()[5] ==
        doctest::Approx((17.0 - 2) / 4 * ((17.0 - 2) / 4) - 1));
  // a BatchLambda on stacked batches
  auto doubled = ds.map(data::transforms::Stack<>())
                     .map(data::transforms::BatchLambda<data::Example<>>(
                         [](data::Example<> e) { return data::Example<>(e.data * 2, e.target); }));
  CHECK(doubled.get_batch({2}).data.flatten().to_vector<float>()[0] == 48.0f);
  // TensorExample datasets stack without targets
  data::datasets::TensorDataset td(of::arange(6, of::kFloat32).reshape({3, 2}));
  data::TensorExample te = td.map(data::transforms::Stack<data::TensorExample>()).get_batch({2, 0});
  CHECK(te.data.flatten().to_vector<float>() == std::vector<float>{4, 5, 0, 1});
  CHECK(th::throws_with([&] { td.get(3); }, {"[TensorDataset]", "3"}));
  CHECK(th::throws_with(
      [] {
        data::transforms::Normalize<>({0.5, 0.5}, {1.0, 0.0});
      },
      {"[Normalize]", "stddev[1]"}));
  CHECK(th::throws_with(
      [] {
        data::transforms::Normalize<>({0.5, 0.5}, {1.0, 2.0, 3.0});
      },
      {"[Normalize]", "2 values", "3"}));
  CHECK(
      th::throws_with([&] { data::transforms::Stack<>().apply_batch({}); }, {"[Stack]", "empty"}));
}

TEST_CASE(
    "data: make_data_loader over custom datasets: workers, drop_last, partial batches, samplers") {
  CsvImages ds(csv_rows(10));
  for (size_t workers : {size_t(0), size_t(3)})
    for (bool drop_last : {false, true}) {
      auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
          ds.map(data::transforms::Stack<>()),
          data::DataLoaderOptions(4).workers(workers).drop_last(drop_last));
      for (int epoch = 0; epoch < 2; ++epoch) {
        std::vector<int64_t> sizes, firsts;
        for (data::Example<>& batch : *loader) {
          sizes.push_back(batch.data.size(0));
          firsts.push_back(int64_t(batch.data.flatten().to_vector<float>()[0]) / 12);
        }
        CHECK(sizes == (drop_last ? std::vector<int64_t>{4, 4} : std::vector<int64_t>{4, 4, 2}));
        CHECK(firsts == (drop_last ? std::vector<int64_t>{0, 4} : std::vector<int64_t>{0, 4, 8}));
      }
      CHECK(loader->options().workers == workers);
      CHECK(loader->options().max_jobs == 2 * workers);
    }
  // unstacked batches are std::vector<Example<>>; the default RandomSampler covers every row
  of::manual_seed(5);
  auto loader = data::make_data_loader(ds, 3);
  std::vector<int64_t> rows;
  for (std::vector<data::Example<>>& batch : *loader) {
    CHECK(batch.size() <= 3);
    for (auto& e : batch) rows.push_back(int64_t(e.data.flatten().to_vector<float>()[0]) / 12);
  }
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(rows != sorted);
  // an explicit sampler, unordered workers
  auto unordered = data::make_data_loader(
      ds.map(data::transforms::Stack<>()), data::samplers::SequentialSampler(7),
      data::DataLoaderOptions(2).workers(2).enforce_ordering(false));
  int64_t total = 0;
  for (auto& batch : *unordered) total += batch.data.size(0);
  CHECK(total == 7);
  // samplers as libtorch's
  data::samplers::SequentialSampler seq(5);
  CHECK(seq.next(3).value() == std::vector<size_t>{0, 1, 2});
  CHECK(seq.next(3).value() == std::vector<size_t>{3, 4});
  CHECK(!seq.next(3).has_value());
  CHECK(seq.index() == 5);
  seq.reset(2);
  CHECK(seq.next(5).value() == std::vector<size_t>{0, 1});
  of::manual_seed(1);
  data::samplers::RandomSampler rnd(6);
  std::vector<size_t> a = rnd.next(4).value(), b2 = rnd.next(4).value();
  CHECK(a.size() == 4);
  CHECK(b2.size() == 2);
  a.insert(a.end(), b2.begin(), b2.end());
  std::sort(a.begin(), a.end());
  CHECK(a == std::vector<size_t>{0, 1, 2, 3, 4, 5});
  rnd.reset(3);
  CHECK(rnd.next(10).value().size() == 3);
  CHECK(rnd.index() == 3);
}

namespace {
struct BrokenRows : data::datasets::Dataset<BrokenRows> {
  data::Example<> get(size_t i) override {
    if (i == 5) oneflow::fail("[BrokenRows] row {} is broken", i);
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return {of::full({1}, double(i)), of::full({}, int64_t(i), of::kInt64)};
  }
  of::optional<size_t> size() const override { return 8; }
  bool slow = false;
};
struct Unsized : data::datasets::Dataset<Unsized> {
  data::Example<> get(size_t) override { return {}; }
  of::optional<size_t> size() const override { return of::nullopt; }
};
}  // namespace

TEST_CASE(
    "data: make_data_loader errors: worker exceptions, timeouts, early re-iteration, options") {
  for (size_t workers : {size_t(0), size_t(2)}) {
    auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
        BrokenRows().map(data::transforms::Stack<>()), data::DataLoaderOptions(2).workers(workers));
    CHECK(th::throws_with(
        [&] {
          for (auto& b : *loader) (void)b;
        },
        {"[BrokenRows]", "row 5"}));
  }
  auto workers = data::make_data_loader<data::samplers::SequentialSampler>(
      BrokenRows(), data::DataLoaderOptions(2).workers(1));
  try {
    for (auto& b : *workers) (void)b;
    FAIL("expected a WorkerException");
  } catch (const data::WorkerException& e) {
    CHECK(std::string(e.what()).find("DataLoader worker thread") != std::string::npos);
    CHECK(e.original_exception != nullptr);
  }
  // leaving a loop early while workers still hold batches, then starting another: refused
  auto early = data::make_data_loader<data::samplers::SequentialSampler>(
      BrokenRows(), data::DataLoaderOptions(1).workers(2));
  for (auto& b : *early) {
    (void)b;
    break;
  }
  CHECK(th::throws_with([&] { early->begin(); }, {"[DataLoader]", "not yet exhausted"}));
  BrokenRows slow;
  slow.slow = true;
  auto timed = data::make_data_loader<data::samplers::SequentialSampler>(
      slow, data::DataLoaderOptions(1).workers(1).timeout(std::chrono::milliseconds(20)));
  CHECK(th::throws_with(
      [&] {
        for (auto& b : *timed) (void)b;
      },
      {"[DataLoader]", "Timeout", "20 ms"}));
  CHECK(th::throws_with([] { data::make_data_loader(Unsized(), 2); },
                        {"[make_data_loader]", "sized"}));
  CHECK(th::throws_with([] { data::make_data_loader(BrokenRows(), data::DataLoaderOptions(0)); },
                        {"[DataLoader]", "batch_size"}));
  CHECK(th::throws_with(
      [] {
        data::make_data_loader(BrokenRows(), data::DataLoaderOptions(2).workers(1).max_jobs(0));
      },
      {"[DataLoader]", "max_jobs"}));
}

TEST_CASE("data: datasets::MNIST reads uncompressed IDX files as libtorch; truncated ones fail") {
  TempDir dir;
  std::string img(size_t(4 * 28 * 28), '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i % 251);
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes(0x08, {4, 28, 28}, img));
  write_file(dir.file("train-labels-idx1-ubyte"),
             idx_bytes(0x08, {4}, std::string("\x07\x00\x09\x02", 4)));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes(0x08, {1, 28, 28}, img.substr(0, 784)));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {1}, std::string("\x05", 1)));
  data::datasets::MNIST train(dir.path.string());
  CHECK(train.is_train());
  CHECK(train.size().value() == 4);
  CHECK(train.images().sizes().vec() == std::vector<int64_t>{4, 1, 28, 28});
  CHECK(train.images().dtype() == of::kFloat32);
  CHECK(train.targets().dtype() == of::kInt64);
  data::Example<> e = train.get(1);
  CHECK(e.data.sizes().vec() == std::vector<int64_t>{1, 28, 28});
  CHECK(e.target.item<int64_t>() == 0);
  CHECK(e.data.flatten().to_vector<float>()[0] == doctest::Approx(float(784 % 251) / 255.0f));
  CHECK(th::throws_with([&] { train.get(4); }, {"[MNIST]", "4"}));
  data::datasets::MNIST test(dir.path.string(), data::datasets::MNIST::Mode::kTest);
  CHECK(!test.is_train());
  CHECK(test.targets().to_vector<int64_t>() == std::vector<int64_t>{5});
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes(0x08, {1, 28, 28}, img.substr(0, 700)));
  CHECK(th::throws_with(
      [&] { data::datasets::MNIST(dir.path.string(), data::datasets::MNIST::Mode::kTest); },
      {"[read_idx]", "t10k-images-idx3-ubyte", "truncated"}));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes(0x08, {1}, "x"));
  CHECK(th::throws_with(
      [&] { data::datasets::MNIST(dir.path.string(), data::datasets::MNIST::Mode::kTest); },
      {"[MNIST]", "t10k-images-idx3-ubyte", "[N, H, W]"}));
}
