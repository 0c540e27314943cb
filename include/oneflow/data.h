// data.h: datasets, a batching DataLoader with seeded shuffling and background prefetching,
// readers for IDX files (MNIST / Fashion-MNIST, gzip or plain) and character-level text.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "oneflow/nn/module.h"
#include "oneflow/ops.h"

namespace oneflow::data {

// One sample or one batch: inputs and targets (libtorch's torch::data::Example<>).
template <class Data = Tensor, class Target = Tensor>
struct Example {
  Data data;
  Target target;
};

// Random access to samples. get_batch's default stacks get(i); override it for speed.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Example<> get(size_t index) = 0;
  virtual Example<> get_batch(const std::vector<int64_t>& indices);
};

// Samples are rows of two tensors (data [N, ...], targets [N, ...]); batches are gathered
// with one index_select each.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  size_t size() const override { return size_t(data_.size(0)); }
  Example<> get(size_t index) override;
  Example<> get_batch(const std::vector<int64_t>& indices) override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 protected:
  TensorDataset() = default;
  Tensor data_, targets_;
};

// Reads an IDX file (the MNIST format; ".gz" files are decompressed): magic, big-endian dims,
// then data of type u8/i8/i16/i32/f32/f64. Errors name the path and what was expected.
Tensor read_idx(const std::string& path);

// MNIST and Fashion-MNIST (same layout): images float32 [N, 1, 28, 28] scaled to [0, 1],
// targets int64 [N]. Looks for train-/t10k-{images-idx3,labels-idx1}-ubyte[.gz] in root.
class MNIST : public TensorDataset {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  bool is_train() const { return train_; }

 private:
  bool train_;
};
using FashionMNIST = MNIST;

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The whole file as bytes (errors name the path).
std::string read_text_file(const std::string& path);

// Character-level vocabulary of a text: ids are the distinct bytes in sorted order.
class CharVocab {
 public:
  explicit CharVocab(const std::string& text);
  int64_t size() const { return int64_t(chars_.size()); }
  // int64 ids [len]; a character outside the vocabulary is an error.
  Tensor encode(const std::string& text) const;
  std::string decode(const Tensor& ids) const;
  char char_at(int64_t id) const;

 private:
  std::string chars_;
  int16_t index_[256];
};

// Windows of block_size + 1 characters: data = ids[i, i + block), target = ids[i + 1, i + block + 1).
class CharDataset : public Dataset {
 public:
  CharDataset(const std::string& text, int64_t block_size);
  size_t size() const override;
  Example<> get(size_t index) override;
  Example<> get_batch(const std::vector<int64_t>& indices) override;
  const CharVocab& vocab() const { return vocab_; }

 private:
  CharVocab vocab_;
  Tensor ids_;
  int64_t block_;
};

struct DataLoaderOptions {
  DataLoaderOptions(int64_t batch_size = 1) : batch_size_(batch_size) {}
  OF_ARG(int64_t, batch_size);
  OF_ARG(bool, shuffle) = false;
  OF_ARG(bool, drop_last) = false;
  OF_ARG(uint64_t, seed) = 0;  // epoch e shuffles with a generator seeded (seed, e)
  OF_ARG(bool, prefetch) = true;  // build the next batches on a worker thread
  OF_ARG(int64_t, prefetch_batches) = 2;

 public:
  // libtorch's spelling: workers(0) loads batches on the calling thread, workers(n > 0) on a
  // background thread (one, whatever n: batches are gathered with whole-batch index_selects).
  DataLoaderOptions& workers(size_t n) {
    prefetch_ = n > 0;
    return *this;
  }
  size_t workers() const { return prefetch_ ? 1 : 0; }
};

// Iterates a dataset in batches: `for (auto& batch : loader) { batch.data; batch.target; }`.
// Each range-for starts a new epoch (a new shuffle when enabled).
class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Iterator {
   public:
    Iterator(DataLoader* loader, bool end) : loader_(loader), end_(end) {
      if (!end_) advance();
    }
    Example<>& operator*() { return current_; }
    Example<>* operator->() { return &current_; }
    Iterator& operator++() {
      advance();
      return *this;
    }
    bool operator!=(const Iterator& o) const { return end_ != o.end_; }
    bool operator==(const Iterator& o) const { return end_ == o.end_; }

   private:
    void advance();
    DataLoader* loader_;
    bool end_;
    Example<> current_;
  };

  Iterator begin();
  Iterator end() { return Iterator(this, true); }
  // Batches per epoch.
  size_t size() const;
  int64_t epoch() const { return epoch_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  friend class Iterator;
  void start_epoch();
  void stop_worker();
  std::optional<Example<>> next_batch();
  Example<> make_batch(size_t b);

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::vector<int64_t> order_;
  int64_t epoch_ = -1;
  size_t next_ = 0;  // next batch index to hand out (no prefetch) or to produce (worker)
  // prefetching
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Example<>> queue_;
  size_t produced_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

// Convenience: libtorch's spelling.
inline std::unique_ptr<DataLoader> make_data_loader(std::shared_ptr<Dataset> dataset,
                                                    DataLoaderOptions options) {
  return std::make_unique<DataLoader>(std::move(dataset), options);
}

// ---- libtorch's data pipeline spelling, so that torch::data code ports unchanged:
//   auto ds = of::data::datasets::MNIST(root).map(of::data::transforms::Normalize<>(0.1307, 0.3081))
//                 .map(of::data::transforms::Stack<>());
//   auto loader = of::data::make_data_loader<of::data::samplers::SequentialSampler>(std::move(ds), 64);
namespace transforms {
// (x - mean) / stddev on the inputs.
template <class T = Example<>>
struct Normalize {
  Normalize(double mean, double stddev) : mean(mean), stddev(stddev) {}
  double mean, stddev;
};
// Batches are already stacked by TensorDataset::get_batch: a no-op kept for source compatibility.
template <class T = Example<>>
struct Stack {};
}  // namespace transforms

namespace samplers {
struct SequentialSampler {};
struct RandomSampler {};
}  // namespace samplers

// A TensorDataset produced by map(); size() is optional as in libtorch.
class MapDataset {
 public:
  explicit MapDataset(std::shared_ptr<TensorDataset> inner) : inner_(std::move(inner)) {}
  std::optional<size_t> size() const { return inner_->size(); }
  MapDataset map(const transforms::Normalize<>& n) const;
  MapDataset map(const transforms::Stack<>&) const { return *this; }
  const std::shared_ptr<TensorDataset>& dataset() const { return inner_; }

 private:
  std::shared_ptr<TensorDataset> inner_;
};

namespace datasets {
// libtorch's torch::data::datasets::MNIST, with .map(...) returning a MapDataset.
class MNIST : public data::MNIST {
 public:
  using data::MNIST::MNIST;
  MapDataset map(const transforms::Normalize<>& n) const;
  MapDataset map(const transforms::Stack<>&) const;
};
}  // namespace datasets

// The sampler decides the order (RandomSampler shuffles each epoch, as libtorch's default).
template <class Sampler = samplers::RandomSampler>
std::unique_ptr<DataLoader> make_data_loader(MapDataset dataset, DataLoaderOptions options) {
  options.shuffle(std::is_same_v<Sampler, samplers::RandomSampler>);
  return std::make_unique<DataLoader>(dataset.dataset(), options);
}
template <class Sampler = samplers::RandomSampler>
std::unique_ptr<DataLoader> make_data_loader(MapDataset dataset, int64_t batch_size) {
  return make_data_loader<Sampler>(std::move(dataset), DataLoaderOptions(batch_size));
}

}  // namespace oneflow::data
