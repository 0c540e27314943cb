// data.h: datasets, a batching DataLoader with seeded shuffling and background prefetching,
// readers for IDX files (MNIST / Fashion-MNIST, gzip or plain) and character-level text; and
// libtorch's torch::data API (CRTP datasets, .map(transform), transforms, samplers,
// make_data_loader with worker threads) so that libtorch data code ports unchanged.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "oneflow/compat.h"
#include "oneflow/nn/module.h"
#include "oneflow/ops.h"

namespace oneflow::data {

// One sample or one batch: inputs and targets (libtorch's torch::data::Example<>).
template <class Data = Tensor, class Target = Tensor> struct Example {
  using DataType = Data;
  using TargetType = Target;
  Example() = default;
  Example(Data data, Target target) : data(std::move(data)), target(std::move(target)) {}
  Data data;
  Target target;
};

namespace example {
// Example<Data, NoTarget>: a sample with inputs only.
using NoTarget = void;
}  // namespace example

template <class Data> struct Example<Data, example::NoTarget> {
  using DataType = Data;
  using TargetType = example::NoTarget;
  Example() = default;
  /* implicit */ Example(Data data) : data(std::move(data)) {}
  operator Data&() { return data; }
  operator const Data&() const { return data; }
  Data data;
};

// A tensor without a target (libtorch's torch::data::TensorExample).
using TensorExample = Example<Tensor, example::NoTarget>;

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

// Windows of block_size + 1 characters: data = ids[i, i + block), target = ids[i + 1, i + block +
// 1).
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

// libtorch's DataLoaderOptions (batch_size, workers, max_jobs, timeout, enforce_ordering,
// drop_last, with its defaults), plus the options of oneflow's own data::DataLoader below
// (shuffle, seed, prefetch, prefetch_batches), which make_data_loader's loaders ignore.
struct DataLoaderOptions {
  DataLoaderOptions() = default;
  /* implicit */ DataLoaderOptions(size_t batch_size) : batch_size_(batch_size) {}
  OF_ARG(size_t, batch_size) = 1;
  // Threads building batches; 0 builds them on the calling thread. Only make_data_loader's
  // loaders read it: data::DataLoader prefetches on one thread when prefetch() is set.
  OF_ARG(size_t, workers) = 0;
  // Batches requested ahead of the consumer; 2 * workers when unset.
  OF_ARG(optional<size_t>, max_jobs);
  // How long to wait for a worker's batch before failing; forever when unset.
  OF_ARG(optional<std::chrono::milliseconds>, timeout);
  // Batches come out in the sampler's order (else: in the order the workers finish them).
  OF_ARG(bool, enforce_ordering) = true;
  // Leave out a last batch smaller than batch_size.
  OF_ARG(bool, drop_last) = false;
  // data::DataLoader only:
  OF_ARG(bool, shuffle) = false;
  OF_ARG(uint64_t, seed) = 0;     // epoch e shuffles with a generator seeded (seed, e)
  OF_ARG(bool, prefetch) = true;  // build the next batches on a worker thread
  OF_ARG(int64_t, prefetch_batches) = 2;
};

// The options a make_data_loader loader runs with, defaults filled in (libtorch's).
struct FullDataLoaderOptions {
  explicit FullDataLoaderOptions(DataLoaderOptions options)
      : batch_size(options.batch_size()),
        workers(options.workers()),
        max_jobs(options.max_jobs().value_or(2 * workers)),
        timeout(options.timeout()),
        enforce_ordering(options.enforce_ordering()),
        drop_last(options.drop_last()) {}
  size_t batch_size;
  size_t workers;
  size_t max_jobs;
  optional<std::chrono::milliseconds> timeout;
  bool enforce_ordering;
  bool drop_last;
};

// Iterates a data::Dataset in batches: `for (auto& batch : loader) { batch.data; batch.target; }`.
// Each range-for starts a new epoch (a new shuffle when enabled). For libtorch's datasets
// (datasets::Dataset<Self>, .map(...)) use make_data_loader below.
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

// A data::DataLoader behind a unique_ptr, as make_data_loader returns its loaders.
inline std::unique_ptr<DataLoader> make_data_loader(std::shared_ptr<Dataset> dataset,
                                                    DataLoaderOptions options) {
  return std::make_unique<DataLoader>(std::move(dataset), options);
}

// ---------------------------------------------------------------- libtorch's torch::data API
// NOTE [libtorch data pipeline]
// libtorch's data API as it is, so that torch::data code ports by the namespace swap:
//   struct Images : of::data::datasets::Dataset<Images> {
//     of::data::Example<> get(size_t i) override;  of::optional<size_t> size() const override;
//   };
//   auto ds = Images(...).map(of::data::transforms::Normalize<>({0.5, 0.5, 0.5}, {0.2, 0.2, 0.2}))
//                 .map(of::data::transforms::Stack<>());
//   auto loader = of::data::make_data_loader(std::move(ds),
//   of::data::DataLoaderOptions(64).workers(2)); for (of::data::Example<>& batch : *loader) ...
// A dataset's BatchType is what get_batch returns: std::vector<Example<>> for a Dataset<Self>,
// the transform's OutputBatchType after .map(t) (Example<> after Stack<>). Loaders copy the
// dataset into each worker thread, so datasets are values that share their tensors.

namespace datasets {
template <class S, class T> class MapDataset;
template <class D, class T> MapDataset<D, T> map(D dataset, T transform);

namespace detail {
template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<optional<T>> : std::true_type {};
}  // namespace detail

// A dataset that returns whole batches for a batch request (libtorch's BatchDataset).
template <class Self, class Batch = std::vector<Example<>>, class BatchRequest = ArrayRef<size_t>>
class BatchDataset {
 public:
  using SelfType = Self;
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;
  // Stateful datasets return optional batches; make_data_loader supports stateless ones.
  constexpr static bool is_stateful = detail::is_optional<BatchType>::value;

  virtual ~BatchDataset() = default;
  // The batch for `request` (a list of indices for index-based datasets).
  virtual Batch get_batch(BatchRequest request) = 0;
  // The number of samples, if known.
  virtual optional<size_t> size() const = 0;

  // A MapDataset applying `transform` to every batch of (a copy of) this dataset.
  template <class TransformType> MapDataset<Self, TransformType> map(TransformType transform) & {
    return datasets::map(static_cast<Self&>(*this), std::move(transform));
  }
  template <class TransformType> MapDataset<Self, TransformType> map(TransformType transform) && {
    return datasets::map(std::move(static_cast<Self&>(*this)), std::move(transform));
  }
};

// A dataset of single examples, batched as a std::vector of get(i) (libtorch's Dataset):
// override get(size_t) and size(); override get_batch too when a whole batch is cheaper.
template <class Self, class SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;
  // The sample at `index`.
  virtual ExampleType get(size_t index) = 0;
  // get(i) for every index, in order.
  std::vector<ExampleType> get_batch(ArrayRef<size_t> indices) override {
    std::vector<ExampleType> batch;
    batch.reserve(indices.size());
    for (const size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

namespace detail {
template <bool C, class T> using optional_if_t = std::conditional_t<C, optional<T>, T>;
// A stateful dataset's optional<Batch> is Batch to its transforms.
template <class T> struct unwrap_optional { using type = T; };
template <class T> struct unwrap_optional<optional<T>> { using type = T; };
}  // namespace detail

// A dataset whose batches are the source's batches passed through a transform's apply_batch
// (libtorch's MapDataset); made by `.map(transform)`, which chains.
template <class SourceDataset, class AppliedTransform>
class MapDataset
    : public BatchDataset<MapDataset<SourceDataset, AppliedTransform>,
                          detail::optional_if_t<SourceDataset::is_stateful,
                                                typename AppliedTransform::OutputBatchType>,
                          typename SourceDataset::BatchRequestType> {
 public:
  using DatasetType = SourceDataset;
  using TransformType = AppliedTransform;
  using BatchRequestType = typename SourceDataset::BatchRequestType;
  using OutputBatchType =
      detail::optional_if_t<SourceDataset::is_stateful, typename AppliedTransform::OutputBatchType>;

  MapDataset(DatasetType dataset, TransformType transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}

  // The source's batch for `indices`, transformed.
  OutputBatchType get_batch(BatchRequestType indices) override {
    if constexpr (SourceDataset::is_stateful) {
      if (auto batch = dataset_.get_batch(std::move(indices)))
        return transform_.apply_batch(std::move(*batch));
      return nullopt;
    } else {
      return transform_.apply_batch(dataset_.get_batch(std::move(indices)));
    }
  }
  // The source's size.
  optional<size_t> size() const noexcept override { return dataset_.size(); }
  // Resets a stateful source.
  void reset() { dataset_.reset(); }
  const SourceDataset& dataset() noexcept { return dataset_; }
  const AppliedTransform& transform() noexcept { return transform_; }

 private:
  SourceDataset dataset_;
  AppliedTransform transform_;
};

// MapDataset(dataset, transform); the transform must take the dataset's batches.
template <class DatasetType, class TransformType>
MapDataset<DatasetType, TransformType> map(DatasetType dataset, TransformType transform) {
  static_assert(
      std::is_same_v<typename detail::unwrap_optional<typename DatasetType::BatchType>::type,
                     typename TransformType::InputBatchType>,
      "BatchType type of dataset does not match input type of transform");
  return {std::move(dataset), std::move(transform)};
}

// Rows of one tensor, as TensorExamples (libtorch's datasets::TensorDataset).
struct TensorDataset : public Dataset<TensorDataset, TensorExample> {
  explicit TensorDataset(const std::vector<Tensor>& tensors) : TensorDataset(stack(tensors)) {}
  explicit TensorDataset(Tensor tensor) : tensor(std::move(tensor)) {}
  TensorExample get(size_t index) override;
  optional<size_t> size() const override { return size_t(tensor.size(0)); }
  Tensor tensor;
};

// libtorch's datasets::MNIST: images float32 [N, 1, H, W] in [0, 1], targets int64 [N], read
// from root/{train,t10k}-{images-idx3,labels-idx1}-ubyte (uncompressed, as libtorch) or the
// same names with ".gz". Missing, malformed or truncated files are an of::Error naming them.
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  // {image [1, H, W], target (0-d)} of sample `index`.
  Example<> get(size_t index) override;
  optional<size_t> size() const override;
  bool is_train() const noexcept;
  const Tensor& images() const;
  const Tensor& targets() const;

 private:
  Tensor images_, targets_;
  bool train_;
};
}  // namespace datasets

namespace transforms {
// Maps a whole batch to another (libtorch's BatchTransform).
template <class InputBatch, class OutputBatch> class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

// Maps each example of a std::vector batch (libtorch's Transform): override apply.
template <class Input, class Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual OutputType apply(InputType input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> output_batch;
    output_batch.reserve(input_batch.size());
    for (auto&& input : input_batch) output_batch.push_back(apply(std::move(input)));
    return output_batch;
  }
};

// A BatchTransform from a function of the whole batch.
template <class Input, class Output = Input>
class BatchLambda : public BatchTransform<Input, Output> {
 public:
  using typename BatchTransform<Input, Output>::InputBatchType;
  using typename BatchTransform<Input, Output>::OutputBatchType;
  using FunctionType = std::function<OutputBatchType(InputBatchType)>;
  explicit BatchLambda(FunctionType function) : function_(std::move(function)) {}
  OutputBatchType apply_batch(InputBatchType input_batch) override {
    return function_(std::move(input_batch));
  }

 private:
  FunctionType function_;
};

// A Transform from a function of one example.
template <class Input, class Output = Input> class Lambda : public Transform<Input, Output> {
 public:
  using typename Transform<Input, Output>::InputType;
  using typename Transform<Input, Output>::OutputType;
  using FunctionType = std::function<Output(Input)>;
  explicit Lambda(FunctionType function) : function_(std::move(function)) {}
  OutputType apply(InputType input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

// Collations turn a std::vector of examples into one batch.
template <class T, class BatchType = std::vector<T>> using Collation = BatchTransform<BatchType, T>;
template <class T, class BatchType = std::vector<T>> using Collate = BatchLambda<BatchType, T>;

// Stacks the examples' data (and targets) along a new first dimension.
template <class T = Example<>> struct Stack;

template <> struct Stack<Example<>> : public Collation<Example<>> {
  Example<> apply_batch(std::vector<Example<>> examples) override;
};

template <> struct Stack<TensorExample> : public Collation<TensorExample> {
  TensorExample apply_batch(std::vector<TensorExample> examples) override;
};

// Transforms the data tensor of each example, keeping the target: override operator().
template <class Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  using typename Transform<E, E>::InputType;
  using typename Transform<E, E>::OutputType;
  virtual Tensor operator()(Tensor input) = 0;
  OutputType apply(InputType input) override {
    input.data = (*this)(std::move(input.data));
    return input;
  }
};

// A TensorTransform from a function of the data tensor.
template <class Target = Tensor> class TensorLambda : public TensorTransform<Target> {
 public:
  using FunctionType = std::function<Tensor(Tensor)>;
  explicit TensorLambda(FunctionType function) : function_(std::move(function)) {}
  Tensor operator()(Tensor input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

namespace detail {
// float32 [C, 1, 1] from the Normalize arguments (checked: non-empty, std != 0, counts agree).
Tensor normalize_stat(ArrayRef<double> values, ArrayRef<double> mean, ArrayRef<double> stddev,
                      bool is_stddev);
}  // namespace detail

// (data - mean) / stddev per channel: mean and stddev hold one value or one per channel, and
// are float32 [C, 1, 1] tensors broadcast against the data's trailing [C, H, W] (libtorch's).
template <class Target = Tensor> struct Normalize : public TensorTransform<Target> {
  Normalize(ArrayRef<double> mean, ArrayRef<double> stddev)
      : mean(detail::normalize_stat(mean, mean, stddev, false)),
        stddev(detail::normalize_stat(stddev, mean, stddev, true)) {}
  Tensor operator()(Tensor input) override { return input.sub(mean).div(stddev); }
  Tensor mean, stddev;
};
}  // namespace transforms

namespace samplers {
// Decides which indices each batch request holds (libtorch's Sampler, without save/load).
template <class BatchRequest = std::vector<size_t>> class Sampler {
 public:
  using BatchRequestType = BatchRequest;
  virtual ~Sampler() = default;
  // Starts a new pass, over `new_size` indices when given.
  virtual void reset(optional<size_t> new_size) = 0;
  // The next up to batch_size indices; nullopt when the pass is over.
  virtual optional<BatchRequest> next(size_t batch_size) = 0;
};

// A fresh random permutation of [0, size) for every pass, drawn from the global generator
// (of::manual_seed makes it reproducible).
class RandomSampler : public Sampler<> {
 public:
  explicit RandomSampler(int64_t size, ScalarType index_dtype = kInt64);
  ~RandomSampler() override;
  void reset(optional<size_t> new_size = nullopt) override;
  optional<std::vector<size_t>> next(size_t batch_size) override;
  // Indices handed out so far in this pass.
  size_t index() const noexcept;

 private:
  Tensor indices_;
  int64_t index_ = 0;
};

// 0, 1, ..., size - 1 in order.
class SequentialSampler : public Sampler<> {
 public:
  explicit SequentialSampler(size_t size);
  void reset(optional<size_t> new_size = nullopt) override;
  optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept;

 private:
  size_t size_;
  size_t index_{0};
};

// NOTE [Distributed samplers]: libtorch's index sets. Each of num_replicas ranks takes the
// rank-th block of local_sample_count() indices: ceil(size / num_replicas) with duplicates
// (the tail wraps to the first indices, so every rank gets as many), floor(size / num_replicas)
// without (the last size % num_replicas indices are left out). The random sampler shuffles the
// whole index list with std::shuffle over std::mt19937(epoch), as libtorch does, so the same
// (size, num_replicas, rank, epoch) gives the same indices as libtorch built with the same C++
// library; every rank draws the same permutation, so the blocks stay disjoint.
template <class BatchRequest = std::vector<size_t>>
class DistributedSampler : public Sampler<BatchRequest> {
 public:
  DistributedSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                     bool allow_duplicates = true)
      : size_(size), num_replicas_(num_replicas), rank_(rank), allow_duplicates_(allow_duplicates) {
    OF_HEADER_CHECK(num_replicas >= 1,
                    "[DistributedSampler] num_replicas must be at least 1 (got 0)");
    OF_HEADER_CHECK(rank < num_replicas,
                    "[DistributedSampler] rank {} is out of range for {} replicas", rank,
                    num_replicas);
  }
  // The epoch seeds the random sampler's next reset().
  void set_epoch(size_t epoch) { epoch_ = epoch; }
  size_t epoch() const { return epoch_; }
  // The next position handed out: this rank's block starts at rank * local_sample_count() (in
  // the shuffled list for the random sampler; before wrapping for the sequential one).
  size_t index() const noexcept { return sample_index_; }

 protected:
  // How many indices each replica gets per pass.
  size_t local_sample_count() const {
    return allow_duplicates_ ? (size_ + num_replicas_ - 1) / num_replicas_ : size_ / num_replicas_;
  }

  size_t size_;
  size_t num_replicas_;
  size_t rank_;
  size_t epoch_ = 0;
  bool allow_duplicates_;
  // This rank's block is [begin_index_, end_index_); sample_index_ is the next one handed out.
  size_t begin_index_ = 0, end_index_ = 0, sample_index_ = 0;
};

// This rank's block of a permutation drawn from the epoch (NOTE [Distributed samplers]).
class DistributedRandomSampler : public DistributedSampler<> {
 public:
  DistributedRandomSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                           bool allow_duplicates = true);
  // Starts a new pass (over new_size indices when given), shuffled by the current epoch.
  void reset(optional<size_t> new_size = nullopt) override;
  optional<std::vector<size_t>> next(size_t batch_size) override;

 private:
  std::vector<size_t> all_indices_;
};

// This rank's contiguous block of 0, 1, ..., size - 1 (NOTE [Distributed samplers]).
class DistributedSequentialSampler : public DistributedSampler<> {
 public:
  DistributedSequentialSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                               bool allow_duplicates = true);
  // Starts a new pass, over new_size indices when given.
  void reset(optional<size_t> new_size = nullopt) override;
  optional<std::vector<size_t>> next(size_t batch_size) override;

 private:
  void populate_indices();
};
}  // namespace samplers

// What a loader throws when get_batch failed on a worker thread: the original is kept, and
// its message is part of this one (libtorch's WorkerException, here also an of::Error).
struct WorkerException : public Error {
  explicit WorkerException(std::exception_ptr original);
  std::exception_ptr original_exception;
  std::string message;
};

// A loader's input iterator (libtorch's data::Iterator): copies share the position; any
// iterator at the end of the epoch equals end().
template <class Batch> class Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  using pointer = Batch*;
  using reference = Batch&;

  Iterator() = default;  // the end sentinel
  explicit Iterator(std::function<optional<Batch>()> next)
      : state_(std::make_shared<State>(State{std::move(next), nullopt, false})) {}

  Batch& operator*() {
    OF_HEADER_CHECK(state_ && fetch(), "[DataLoader] dereferencing the end of the data loader");
    return *state_->batch;
  }
  Batch* operator->() { return &**this; }
  Iterator& operator++() {
    OF_HEADER_CHECK(state_ && fetch(), "[DataLoader] incrementing past the end of the data loader");
    state_->batch = state_->next();
    return *this;
  }
  bool operator==(const Iterator& other) const {
    if (state_ && state_ == other.state_) return true;
    return at_end() && other.at_end();
  }
  bool operator!=(const Iterator& other) const { return !(*this == other); }

 private:
  struct State {
    std::function<optional<Batch>()> next;
    optional<Batch> batch;
    bool fetched;
  };
  // Batches are fetched lazily, so that begin() itself does not block (libtorch's).
  bool fetch() const {
    if (!state_->fetched) {
      state_->batch = state_->next();
      state_->fetched = true;
    }
    return state_->batch.has_value();
  }
  bool at_end() const { return !state_ || !fetch(); }
  std::shared_ptr<State> state_;
};

// libtorch's StatelessDataLoader: a sampler picks each batch's indices, the dataset's get_batch
// builds it on the calling thread (workers == 0) or on `workers` threads, each with its own copy
// of the dataset, up to max_jobs batches ahead. Each range-for is one pass of the sampler; a
// new pass while worker batches are still in flight (a loop left early) is an error, as in
// libtorch.
template <class Dataset, class Sampler> class StatelessDataLoader {
 public:
  using BatchType = typename Dataset::BatchType;
  using BatchRequestType = typename Sampler::BatchRequestType;

  StatelessDataLoader(Dataset dataset, Sampler sampler, DataLoaderOptions options)
      : options_(check_options(options)), sampler_(std::move(sampler)) {
    for (size_t w = 0; w < options_.workers; ++w)
      workers_.emplace_back([this, dataset]() mutable { worker_loop(dataset); });
    if (options_.workers == 0) main_thread_dataset_ = std::make_unique<Dataset>(std::move(dataset));
  }
  ~StatelessDataLoader() { join(); }
  StatelessDataLoader(const StatelessDataLoader&) = delete;
  StatelessDataLoader& operator=(const StatelessDataLoader&) = delete;

  // Starts a pass: resets the sampler and queues the first max_jobs requests.
  Iterator<BatchType> begin() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      OF_HEADER_CHECK(in_flight_ == 0,
                      "[DataLoader] Attempted to get a new DataLoader iterator while another "
                      "iterator is not yet exhausted ({} batches still in flight)",
                      in_flight_);
    }
    OF_HEADER_CHECK(!joined_, "[DataLoader] the loader's workers have been joined");
    sampler_.reset();
    next_sequence_ = 0;
    sequence_ = 0;
    prefetch(options_.max_jobs);
    return Iterator<BatchType>([this] { return next(); });
  }
  Iterator<BatchType> end() { return Iterator<BatchType>(); }

  // Discards queued work and stops the worker threads (the destructor does this too).
  void join() {
    if (joined_) return;
    {
      std::unique_lock<std::mutex> lk(mu_);
      in_flight_ -= jobs_.size();
      jobs_.clear();
      results_cv_.wait(lk, [&] { return results_.size() == in_flight_; });
      results_.clear();
      in_flight_ = 0;
      for (size_t w = 0; w < workers_.size(); ++w) jobs_.push_back(Job{0, nullopt});
    }
    jobs_cv_.notify_all();
    for (auto& worker : workers_) worker.join();
    joined_ = true;
  }

  const FullDataLoaderOptions& options() const noexcept { return options_; }

 private:
  struct Job {
    size_t sequence;
    optional<BatchRequestType> request;  // none: the worker quits
  };
  struct Result {
    size_t sequence;
    optional<BatchType> batch;
    std::exception_ptr error;
  };

  static DataLoaderOptions check_options(const DataLoaderOptions& o) {
    OF_HEADER_CHECK(o.batch_size() > 0, "[DataLoader] batch_size must be positive, got {}",
                    o.batch_size());
    OF_HEADER_CHECK(o.workers() == 0 || o.max_jobs().value_or(1) > 0,
                    "[DataLoader] max_jobs must be positive when workers ({}) > 0", o.workers());
    return o;
  }

  optional<BatchRequestType> get_batch_request() {
    auto indices = sampler_.next(options_.batch_size);
    if (!indices || (indices->size() < options_.batch_size && options_.drop_last)) return nullopt;
    return indices;
  }

  void prefetch(size_t requested_jobs) {
    if (options_.workers == 0) return;
    for (size_t r = 0; r < requested_jobs; ++r) {
      auto request = get_batch_request();
      if (!request) break;
      {
        std::lock_guard<std::mutex> lk(mu_);
        jobs_.push_back(Job{sequence_++, std::move(request)});
        ++in_flight_;
      }
      jobs_cv_.notify_one();
    }
  }

  optional<BatchType> next() {
    if (options_.workers == 0) {
      if (auto request = get_batch_request())
        return main_thread_dataset_->get_batch(std::move(*request));
      return nullopt;
    }
    optional<Result> result = pop_result();
    if (!result) return nullopt;
    if (result->error) throw WorkerException(result->error);
    prefetch(1);
    return std::move(result->batch);
  }

  // The next result (in sequence order when enforce_ordering); nullopt when none is in flight.
  optional<Result> pop_result() {
    std::unique_lock<std::mutex> lk(mu_);
    if (in_flight_ == 0) return nullopt;
    auto found = results_.end();
    auto ready = [&] {
      found = options_.enforce_ordering
                  ? std::find_if(results_.begin(), results_.end(),
                                 [&](const Result& r) { return r.sequence == next_sequence_; })
                  : results_.begin();
      return found != results_.end();
    };
    if (options_.timeout) {
      if (!results_cv_.wait_for(lk, *options_.timeout, ready))
        throw_error(
            "[DataLoader] Timeout in DataLoader queue while waiting for next batch "
            "(timeout was {} ms)",
            options_.timeout->count());
    } else {
      results_cv_.wait(lk, ready);
    }
    Result r = std::move(*found);
    results_.erase(found);
    --in_flight_;
    if (options_.enforce_ordering) ++next_sequence_;
    return r;
  }

  void worker_loop(Dataset& dataset) {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        jobs_cv_.wait(lk, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (!job.request) return;
      Result r{job.sequence, nullopt, nullptr};
      try {
        r.batch = dataset.get_batch(std::move(*job.request));
      } catch (...) { r.error = std::current_exception(); }
      {
        std::lock_guard<std::mutex> lk(mu_);
        results_.push_back(std::move(r));
      }
      results_cv_.notify_all();
    }
  }

  FullDataLoaderOptions options_;
  Sampler sampler_;
  std::unique_ptr<Dataset> main_thread_dataset_;
  size_t sequence_ = 0, next_sequence_ = 0;
  bool joined_ = false;
  std::mutex mu_;
  std::condition_variable jobs_cv_, results_cv_;
  std::deque<Job> jobs_;
  std::vector<Result> results_;
  size_t in_flight_ = 0;  // jobs queued or running, plus results not yet handed out
  std::vector<std::thread> workers_;
};

// A loader over `dataset` drawing indices from `sampler` (libtorch's make_data_loader).
template <class Dataset, class Sampler>
requires(!Dataset::is_stateful)
    std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(
        Dataset dataset, Sampler sampler, DataLoaderOptions options) {
  return std::make_unique<StatelessDataLoader<Dataset, Sampler>>(std::move(dataset),
                                                                 std::move(sampler), options);
}

// A loader over a sized dataset with a Sampler(size) (RandomSampler: a new shuffle each pass);
// a bare batch size converts to DataLoaderOptions.
template <class Sampler = samplers::RandomSampler, class Dataset>
requires(!Dataset::is_stateful && std::is_constructible_v<Sampler, size_t>)
    std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(
        Dataset dataset, DataLoaderOptions options = DataLoaderOptions()) {
  const optional<size_t> size = dataset.size();
  OF_HEADER_CHECK(size.has_value(),
                  "[make_data_loader] Expected the dataset to be sized in order "
                  "to construct the Sampler");
  return make_data_loader(std::move(dataset), Sampler(*size), options);
}

}  // namespace oneflow::data
