// Datasets, IDX and text readers, and the prefetching DataLoader.
#include "oneflow/data.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

#include "generator.h"

namespace oneflow::data {

// ---------------------------------------------------------------- datasets

Example<> Dataset::get_batch(const std::vector<int64_t>& indices) {
  std::vector<Tensor> xs, ys;
  for (int64_t i : indices) {
    Example<> e = get(size_t(i));
    xs.push_back(e.data);
    ys.push_back(e.target);
  }
  return {stack(xs), stack(ys)};
}

TensorDataset::TensorDataset(Tensor data, Tensor targets)
    : data_(std::move(data)), targets_(std::move(targets)) {
  OF_CHECK(data_.defined() && targets_.defined(),
           "[TensorDataset] data and targets must be defined");
  OF_CHECK(data_.dim() >= 1 && targets_.dim() >= 1 && data_.size(0) == targets_.size(0),
           "[TensorDataset] data {} and targets {} must have the same first dimension",
           shape_str(data_.sizes()), shape_str(targets_.sizes()));
}

Example<> TensorDataset::get(size_t index) {
  OF_CHECK(index < size(), "[TensorDataset] index {} out of range for {} samples", index, size());
  return {data_.select(0, int64_t(index)), targets_.select(0, int64_t(index))};
}

Example<> TensorDataset::get_batch(const std::vector<int64_t>& indices) {
  Tensor idx = tensor(indices, {int64_t(indices.size())});
  return {index_select(data_, 0, idx), index_select(targets_, 0, idx)};
}

// ---------------------------------------------------------------- files

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whole file, gunzipped when it ends in ".gz".
std::string read_bytes(const std::string& path, const char* op) {
  if (ends_with(path, ".gz")) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) fail("[{}] cannot open '{}': {}", op, path, std::strerror(errno));
    std::string out;
    char buf[1 << 16];
    for (;;) {
      int n = gzread(f, buf, sizeof(buf));
      if (n < 0) {
        int err = 0;
        std::string msg = gzerror(f, &err);
        gzclose(f);
        fail("[{}] '{}' is not a valid gzip file: {}", op, path, msg);
      }
      if (n == 0) break;
      out.append(buf, size_t(n));
    }
    gzclose(f);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("[{}] cannot open '{}': {}", op, path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

std::string read_text_file(const std::string& path) { return read_bytes(path, "read_text_file"); }

Tensor read_idx(const std::string& path) {
  const std::string bytes = read_bytes(path, "read_idx");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4 || p[0] != 0 || p[1] != 0)
    fail(
        "[read_idx] '{}' is not an IDX file (expected magic 00 00 <type> <ndim>, file has {} "
        "bytes)",
        path, bytes.size());
  ScalarType dtype;
  size_t item = 1;
  switch (p[2]) {
    case 0x08:
      dtype = kUInt8;
      item = 1;
      break;
    case 0x09:
      dtype = kInt32;
      item = 1;
      break;  // int8, widened
    case 0x0B:
      dtype = kInt32;
      item = 2;
      break;  // int16, widened
    case 0x0C:
      dtype = kInt32;
      item = 4;
      break;
    case 0x0D:
      dtype = kFloat32;
      item = 4;
      break;
    case 0x0E:
      dtype = kFloat64;
      item = 8;
      break;
    default:
      fail("[read_idx] '{}': unknown IDX data type 0x{:02x}", path, p[2]);
  }
  const size_t nd = p[3];
  if (bytes.size() < 4 + 4 * nd)
    fail("[read_idx] '{}' is truncated: header needs {} bytes, file has {}", path, 4 + 4 * nd,
         bytes.size());
  std::vector<int64_t> shape;
  uint64_t n = 1;
  for (size_t d = 0; d < nd; ++d) {
    shape.push_back(int64_t(be32(p + 4 + 4 * d)));
    n *= uint64_t(shape.back());
  }
  const size_t offset = 4 + 4 * nd;
  if (bytes.size() - offset != n * item)
    fail(
        "[read_idx] '{}' is truncated or has trailing data: shape {} needs {} data bytes, file "
        "has {}",
        path, shape_str(shape), n * item, bytes.size() - offset);
  Tensor t = empty(shape, dtype);
  const unsigned char* src = p + offset;
  if (p[2] == 0x08) {
    std::memcpy(t.data_ptr(), src, n);
  } else if (p[2] == 0x09) {
    auto* o = t.data_ptr<int32_t>();
    for (uint64_t i = 0; i < n; ++i) o[i] = int8_t(src[i]);
  } else if (p[2] == 0x0B) {
    auto* o = t.data_ptr<int32_t>();
    for (uint64_t i = 0; i < n; ++i) o[i] = int16_t((src[2 * i] << 8) | src[2 * i + 1]);
  } else {
    // big-endian 4- or 8-byte items
    auto* o = static_cast<unsigned char*>(t.data_ptr());
    for (uint64_t i = 0; i < n; ++i)
      for (size_t b = 0; b < item; ++b) o[i * item + b] = src[i * item + item - 1 - b];
  }
  return t;
}

namespace {
std::string find_idx(const std::string& root, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    std::string path = root + "/" + name;
    if (std::ifstream(path).good()) return path;
  }
  fail(
      "[MNIST] neither '{0}/{1}' nor '{0}/{1}.gz' exists (install Debian's dataset-fashion-mnist, "
      "or point root at an MNIST-format directory)",
      root, stem);
}

// images float32 [N, 1, H, W] / 255 and targets int64 [N] from root (train or t10k files).
std::pair<Tensor, Tensor> load_mnist(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string ipath = find_idx(root, prefix + "-images-idx3-ubyte");
  const std::string lpath = find_idx(root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(ipath), labels = read_idx(lpath);
  if (images.dim() != 3 || images.dtype() != kUInt8)
    fail("[MNIST] '{}': expected uint8 images [N, H, W], got {} {}", ipath,
         dtype_name(images.dtype()), shape_str(images.sizes()));
  if (labels.dim() != 1 || labels.size(0) != images.size(0))
    fail("[MNIST] '{}': expected {} labels, got shape {}", lpath, images.size(0),
         shape_str(labels.sizes()));
  return {(images.to(kFloat32) / 255.0).unsqueeze(1).contiguous(), labels.to(kInt64)};
}
}  // namespace

MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  std::tie(data_, targets_) = load_mnist(root, train_);
}

// ---------------------------------------------------------------- text

CharVocab::CharVocab(const std::string& text) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  std::fill(std::begin(index_), std::end(index_), int16_t(-1));
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      index_[c] = int16_t(chars_.size());
      chars_.push_back(char(c));
    }
}

Tensor CharVocab::encode(const std::string& text) const {
  Tensor t = empty({int64_t(text.size())}, kInt64);
  int64_t* o = t.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) {
    const int16_t id = index_[static_cast<unsigned char>(text[i])];
    if (id < 0)
      fail("[CharVocab] character {} at position {} is not in the vocabulary", int(text[i]), i);
    o[i] = id;
  }
  return t;
}

char CharVocab::char_at(int64_t id) const {
  OF_CHECK(id >= 0 && id < size(), "[CharVocab] id {} out of range for a vocabulary of {}", id,
           size());
  return chars_[size_t(id)];
}

std::string CharVocab::decode(const Tensor& ids) const {
  std::string s;
  for (int64_t id : ids.to(kInt64).to_vector<int64_t>()) s.push_back(char_at(id));
  return s;
}

CharDataset::CharDataset(const std::string& text, int64_t block_size)
    : vocab_(text), ids_(vocab_.encode(text)), block_(block_size) {
  OF_CHECK(block_size > 0, "[CharDataset] block_size must be positive, got {}", block_size);
  OF_CHECK(int64_t(text.size()) > block_size,
           "[CharDataset] the text ({} characters) must be longer than block_size {}", text.size(),
           block_size);
}

size_t CharDataset::size() const { return size_t(ids_.size(0) - block_); }

Example<> CharDataset::get(size_t index) {
  OF_CHECK(index < size(), "[CharDataset] index {} out of range for {} windows", index, size());
  return {ids_.narrow(0, int64_t(index), block_).clone(),
          ids_.narrow(0, int64_t(index) + 1, block_).clone()};
}

Example<> CharDataset::get_batch(const std::vector<int64_t>& indices) {
  const int64_t b = int64_t(indices.size());
  Tensor x = empty({b, block_}, kInt64), y = empty({b, block_}, kInt64);
  const int64_t* src = ids_.data_ptr<int64_t>();
  int64_t *px = x.data_ptr<int64_t>(), *py = y.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[size_t(r)];
    OF_CHECK(i >= 0 && size_t(i) < size(), "[CharDataset] index {} out of range for {} windows", i,
             size());
    std::memcpy(px + r * block_, src + i, size_t(block_) * sizeof(int64_t));
    std::memcpy(py + r * block_, src + i + 1, size_t(block_) * sizeof(int64_t));
  }
  return {x, y};
}

// ---------------------------------------------------------------- libtorch's torch::data API

TensorExample datasets::TensorDataset::get(size_t index) {
  OF_CHECK(index < size_t(tensor.size(0)), "[TensorDataset] index {} out of range for {} rows",
           index, tensor.size(0));
  return tensor.select(0, int64_t(index));
}

datasets::MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  std::tie(images_, targets_) = load_mnist(root, train_);
}

Example<> datasets::MNIST::get(size_t index) {
  OF_CHECK(index < size_t(images_.size(0)), "[MNIST] index {} out of range for {} images", index,
           images_.size(0));
  return {images_.select(0, int64_t(index)), targets_.select(0, int64_t(index))};
}

optional<size_t> datasets::MNIST::size() const { return size_t(images_.size(0)); }
bool datasets::MNIST::is_train() const noexcept { return train_; }
const Tensor& datasets::MNIST::images() const { return images_; }
const Tensor& datasets::MNIST::targets() const { return targets_; }

Example<> transforms::Stack<Example<>>::apply_batch(std::vector<Example<>> examples) {
  OF_CHECK(!examples.empty(), "[Stack] cannot collate an empty batch");
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& example : examples) {
    data.push_back(std::move(example.data));
    targets.push_back(std::move(example.target));
  }
  return {stack(data), stack(targets)};
}

TensorExample transforms::Stack<TensorExample>::apply_batch(std::vector<TensorExample> examples) {
  OF_CHECK(!examples.empty(), "[Stack] cannot collate an empty batch");
  std::vector<Tensor> data;
  data.reserve(examples.size());
  for (auto& example : examples) data.push_back(std::move(example.data));
  return stack(data);
}

Tensor transforms::detail::normalize_stat(ArrayRef<double> values, ArrayRef<double> mean,
                                          ArrayRef<double> stddev, bool is_stddev) {
  OF_CHECK(!mean.empty() && !stddev.empty(),
           "[Normalize] mean ({} values) and stddev ({} values) "
           "must not be empty",
           mean.size(), stddev.size());
  OF_CHECK(mean.size() == stddev.size() || mean.size() == 1 || stddev.size() == 1,
           "[Normalize] mean has {} values and stddev {}: give one value or one per channel for "
           "both",
           mean.size(), stddev.size());
  if (is_stddev)
    for (size_t c = 0; c < stddev.size(); ++c)
      OF_CHECK(stddev[c] != 0, "[Normalize] stddev must not be zero (stddev[{}] = 0)", c);
  return tensor(values.vec(), {int64_t(values.size())}, kFloat64)
      .to(kFloat32)
      .unsqueeze(1)
      .unsqueeze(2);
}

samplers::RandomSampler::RandomSampler(int64_t size, ScalarType index_dtype)
    : indices_(randperm(size, index_dtype)) {}

samplers::RandomSampler::~RandomSampler() = default;

void samplers::RandomSampler::reset(optional<size_t> new_size) {
  const size_t size = new_size.value_or(size_t(indices_.numel()));
  indices_ = randperm(int64_t(size), indices_.dtype());
  index_ = 0;
}

optional<std::vector<size_t>> samplers::RandomSampler::next(size_t batch_size) {
  const size_t remaining = size_t(indices_.numel() - index_);
  if (remaining == 0) return nullopt;
  std::vector<size_t> batch(std::min(batch_size, remaining));
  // Indices may be stored narrower than 64 bits; a batch's worth is widened here.
  Tensor slice = indices_.slice(0, index_, index_ + int64_t(batch.size())).to(kInt64).contiguous();
  const int64_t* p = slice.data_ptr<int64_t>();
  std::copy(p, p + batch.size(), batch.begin());
  index_ += int64_t(batch.size());
  return batch;
}

size_t samplers::RandomSampler::index() const noexcept { return size_t(index_); }

samplers::SequentialSampler::SequentialSampler(size_t size) : size_(size) {}

void samplers::SequentialSampler::reset(optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  index_ = 0;
}

optional<std::vector<size_t>> samplers::SequentialSampler::next(size_t batch_size) {
  const size_t remaining = size_ - index_;
  if (remaining == 0) return nullopt;
  std::vector<size_t> batch(std::min(batch_size, remaining));
  for (size_t& i : batch) i = index_++;
  return batch;
}

size_t samplers::SequentialSampler::index() const noexcept { return index_; }

samplers::DistributedRandomSampler::DistributedRandomSampler(size_t size, size_t num_replicas,
                                                             size_t rank, bool allow_duplicates)
    : DistributedSampler(size, num_replicas, rank, allow_duplicates) {
  reset(size_);
}

void samplers::DistributedRandomSampler::reset(optional<size_t> new_size) {
  size_ = new_size.value_or(size_);
  const size_t local = local_sample_count();
  // With duplicates the list is padded to local * num_replicas by wrapping to the start;
  // without, it is cut to that length (libtorch's index sets, NOTE [Distributed samplers]).
  all_indices_.resize(num_replicas_ == 1 ? size_ : local * num_replicas_);
  for (size_t i = 0; i < all_indices_.size(); ++i) all_indices_[i] = i < size_ ? i : i - size_;
  std::mt19937 gen(static_cast<std::mt19937::result_type>(epoch_));
  std::shuffle(all_indices_.begin(), all_indices_.end(), gen);
  begin_index_ = rank_ * local;
  end_index_ = begin_index_ + local;
  sample_index_ = begin_index_;
}

optional<std::vector<size_t>> samplers::DistributedRandomSampler::next(size_t batch_size) {
  if (sample_index_ == end_index_) return nullopt;
  const size_t end = std::min(sample_index_ + batch_size, end_index_);
  std::vector<size_t> batch(all_indices_.begin() + std::ptrdiff_t(sample_index_),
                            all_indices_.begin() + std::ptrdiff_t(end));
  sample_index_ = end;
  return batch;
}

samplers::DistributedSequentialSampler::DistributedSequentialSampler(size_t size,
                                                                     size_t num_replicas,
                                                                     size_t rank,
                                                                     bool allow_duplicates)
    : DistributedSampler(size, num_replicas, rank, allow_duplicates) {
  populate_indices();
}

void samplers::DistributedSequentialSampler::populate_indices() {
  begin_index_ = rank_ * local_sample_count();
  end_index_ = begin_index_ + local_sample_count();
  sample_index_ = begin_index_;
}

void samplers::DistributedSequentialSampler::reset(optional<size_t> new_size) {
  if (new_size && *new_size != size_) {
    size_ = *new_size;
    populate_indices();
  } else {
    sample_index_ = begin_index_;
  }
}

optional<std::vector<size_t>> samplers::DistributedSequentialSampler::next(size_t batch_size) {
  if (sample_index_ == end_index_) return nullopt;
  const size_t end = std::min(sample_index_ + batch_size, end_index_);
  std::vector<size_t> batch(end - sample_index_);
  // past the end the block wraps to the first indices (duplicates, as libtorch pads)
  for (size_t& i : batch) i = sample_index_++ % size_;
  return batch;
}

namespace {
std::string worker_message(const std::exception_ptr& original) {
  std::string message = "[DataLoader] Caught exception in DataLoader worker thread.";
  try {
    std::rethrow_exception(original);
  } catch (const std::exception& e) {
    message += " Original message: ";
    message += e.what();
  } catch (...) {}
  return message;
}
}  // namespace

WorkerException::WorkerException(std::exception_ptr original)
    : Error(worker_message(original)), original_exception(std::move(original)), message(what()) {}

// ---------------------------------------------------------------- DataLoader

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  OF_CHECK(dataset_ != nullptr, "[DataLoader] dataset is null");
  OF_CHECK(options_.batch_size() > 0, "[DataLoader] batch_size must be positive, got {}",
           options_.batch_size());
  OF_CHECK(options_.prefetch_batches() > 0, "[DataLoader] prefetch_batches must be positive");
}

DataLoader::~DataLoader() { stop_worker(); }

size_t DataLoader::size() const {
  const size_t n = dataset_->size(), b = size_t(options_.batch_size());
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

Example<> DataLoader::make_batch(size_t b) {
  const size_t bs = size_t(options_.batch_size());
  const size_t lo = b * bs, hi = std::min(order_.size(), lo + bs);
  return dataset_->get_batch(
      std::vector<int64_t>(order_.begin() + long(lo), order_.begin() + long(hi)));
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void DataLoader::start_epoch() {
  stop_worker();
  ++epoch_;
  const size_t n = dataset_->size();
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = int64_t(i);
  if (options_.shuffle()) {
    // Fisher-Yates driven by Philox(seed, epoch): reproducible, independent of threads.
    const uint64_t key = options_.seed() * 0x9E3779B97F4A7C15ull + uint64_t(epoch_);
    for (size_t i = n; i > 1; --i) {
      uint32_t r[4];
      Philox::generate(key, i, r);
      const uint64_t x = (uint64_t(r[0]) << 32) | r[1];
      std::swap(order_[i - 1], order_[size_t(x % i)]);
    }
  }
  next_ = 0;
  queue_.clear();
  produced_ = consumed_ = 0;
  stop_ = false;
  error_ = nullptr;
  if (options_.prefetch()) {
    worker_ = std::thread([this] {
      const size_t total = size();
      for (size_t b = 0; b < total; ++b) {
        {
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait(lk,
                   [&] { return stop_ || queue_.size() < size_t(options_.prefetch_batches()); });
          if (stop_) return;
        }
        Example<> e;
        try {
          e = make_batch(b);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu_);
          error_ = std::current_exception();
          cv_.notify_all();
          return;
        }
        {
          std::lock_guard<std::mutex> lk(mu_);
          queue_.push_back(std::move(e));
          ++produced_;
        }
        cv_.notify_all();
      }
    });
  }
}

std::optional<Example<>> DataLoader::next_batch() {
  const size_t total = size();
  if (!options_.prefetch()) {
    if (next_ >= total) return std::nullopt;
    return make_batch(next_++);
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (consumed_ >= total) return std::nullopt;
  cv_.wait(lk, [&] { return !queue_.empty() || error_ != nullptr; });
  if (queue_.empty() && error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    lk.unlock();
    stop_worker();
    std::rethrow_exception(e);
  }
  Example<> e = std::move(queue_.front());
  queue_.pop_front();
  ++consumed_;
  lk.unlock();
  cv_.notify_all();
  return e;
}

DataLoader::Iterator DataLoader::begin() {
  start_epoch();
  return Iterator(this, false);
}

void DataLoader::Iterator::advance() {
  std::optional<Example<>> e = loader_->next_batch();
  if (!e) {
    end_ = true;
    current_ = Example<>();
    return;
  }
  current_ = std::move(*e);
}

}  // namespace oneflow::data
