// small_vector.h: SmallVector (inline storage), IntArrayRef (a non-owning int64 list) and
// ArrayRef<T> (the same for any element type).
#pragma once
#include <ostream>
#include <stdexcept>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace oneflow {

// A vector that keeps up to N elements inline; shapes and operand lists never touch the heap.
template <class T, size_t N> class SmallVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  SmallVector() = default;
  SmallVector(size_t n, const T& v = T()) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { append(il.begin(), il.end()); }
  template <class It, class = decltype(*std::declval<It>())> SmallVector(It b, It e) {
    append(b, e);
  }
  SmallVector(const SmallVector& o) { append(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { move_from(std::move(o)); }
  ~SmallVector() { destroy(); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      destroy();
      size_ = 0;
      cap_ = N;
      data_ = inline_ptr();
      move_from(std::move(o));
    }
    return *this;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    T* nd = static_cast<T*>(::operator new(n * sizeof(T)));
    for (size_t i = 0; i < size_; ++i) {
      new (nd + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    if (data_ != inline_ptr()) ::operator delete(data_);
    data_ = nd;
    cap_ = n;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  template <class... A> T& emplace_back(A&&... a) {
    if (size_ == cap_) reserve(cap_ * 2);
    new (data_ + size_) T(std::forward<A>(a)...);
    return data_[size_++];
  }
  void pop_back() { data_[--size_].~T(); }
  void clear() {
    for (size_t i = 0; i < size_; ++i) data_[i].~T();
    size_ = 0;
  }
  void resize(size_t n, const T& v = T()) {
    if (n < size_) {
      for (size_t i = n; i < size_; ++i) data_[i].~T();
      size_ = n;
      return;
    }
    reserve(n);
    for (size_t i = size_; i < n; ++i) new (data_ + i) T(v);
    size_ = n;
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }
  template <class It> void append(It b, It e) {
    reserve(size_ + size_t(std::distance(b, e)));
    for (; b != e; ++b) new (data_ + size_++) T(*b);
  }
  T* insert(T* pos, const T& v) {
    size_t idx = size_t(pos - data_);
    emplace_back(v);
    std::rotate(data_ + idx, data_ + size_ - 1, data_ + size_);
    return data_ + idx;
  }
  T* erase(T* pos) {
    std::move(pos + 1, end(), pos);
    pop_back();
    return pos;
  }
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  T* inline_ptr() { return reinterpret_cast<T*>(&inline_); }
  void destroy() {
    clear();
    if (data_ != inline_ptr()) ::operator delete(data_);
  }
  void move_from(SmallVector&& o) {
    if (o.data_ != o.inline_ptr()) {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = o.inline_ptr();
      o.size_ = 0;
      o.cap_ = N;
    } else {
      for (size_t i = 0; i < o.size_; ++i) new (data_ + i) T(std::move(o.data_[i]));
      size_ = o.size_;
      o.clear();
    }
  }
  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = inline_ptr();
  size_t size_ = 0;
  size_t cap_ = N;
};

using DimVector = SmallVector<int64_t, 6>;

// A read-only view of int64 values: accepts {1, 2}, std::vector<int64_t>, DimVector or one int.
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}
  IntArrayRef(const int64_t* d, size_t n) : data_(d), size_(n) {}
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  IntArrayRef(const SmallVector<int64_t, N>& v) : data_(v.data()), size_(v.size()) {}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  // Lives as long as the braced list: use IntArrayRef only as a function parameter.
  IntArrayRef(std::initializer_list<int64_t> il) : data_(il.begin()), size_(il.size()) {}
#pragma GCC diagnostic pop
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t back() const { return data_[size_ - 1]; }
  int64_t front() const { return data_[0]; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  DimVector dims() const { return DimVector(begin(), end()); }
  // libtorch's ArrayRef::slice: the `n` elements from `start` (to the end when n is omitted).
  IntArrayRef slice(size_t start, size_t n) const {
    if (start > size_ || n > size_ - start)
      throw std::out_of_range("[IntArrayRef::slice] range is out of bounds");
    return IntArrayRef(data_ + start, n);
  }
  IntArrayRef slice(size_t start) const { return slice(start, start <= size_ ? size_ - start : 0); }
  friend bool operator==(IntArrayRef a, IntArrayRef b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  // Prints as libtorch does: [2, 3, 4].
  friend std::ostream& operator<<(std::ostream& os, IntArrayRef a) {
    os << '[';
    for (size_t i = 0; i < a.size_; ++i) os << (i ? ", " : "") << a.data_[i];
    return os << ']';
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

// A read-only view of T values, libtorch's c10::ArrayRef<T>: accepts one value, a braced list,
// a std::vector, a std::array, a C array or a pointer and a count. Use it only as a parameter.
template <class T> class ArrayRef {
 public:
  using value_type = T;
  using iterator = const T*;
  using const_iterator = const T*;
  using size_type = size_t;
  ArrayRef() = default;
  ArrayRef(const T& one) : data_(&one), size_(1) {}
  ArrayRef(const T* d, size_t n) : data_(d), size_(n) {}
  ArrayRef(const T* b, const T* e) : data_(b), size_(size_t(e - b)) {}
  template <class A> ArrayRef(const std::vector<T, A>& v) : data_(v.data()), size_(v.size()) {}
  template <size_t N> ArrayRef(const std::array<T, N>& a) : data_(a.data()), size_(N) {}
  template <size_t N> ArrayRef(const T (&a)[N]) : data_(a), size_(N) {}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  ArrayRef(std::initializer_list<T> il) : data_(il.begin()), size_(il.size()) {}
#pragma GCC diagnostic pop
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("[ArrayRef::at] index is out of bounds");
    return data_[i];
  }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& front() const { return data_[0]; }
  const T& back() const { return data_[size_ - 1]; }
  std::vector<T> vec() const { return {begin(), end()}; }
  ArrayRef slice(size_t start, size_t n) const {
    if (start > size_ || n > size_ - start)
      throw std::out_of_range("[ArrayRef::slice] range is out of bounds");
    return ArrayRef(data_ + start, n);
  }
  ArrayRef slice(size_t start) const { return slice(start, start <= size_ ? size_ - start : 0); }
  bool equals(ArrayRef o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace oneflow
