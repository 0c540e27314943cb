// ordered_dict.h: an insertion-ordered map (libtorch's torch::OrderedDict), used for named
// parameters, buffers, submodules and state dicts.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "oneflow/error.h"

namespace oneflow {

template <class Key, class Value> class OrderedDict {
 public:
  // One entry: item.key(), item.value() (as libtorch's OrderedDict::Item).
  class Item {
   public:
    Item(Key key, Value value) : kv_(std::move(key), std::move(value)) {}
    const Key& key() const { return kv_.first; }
    Value& value() { return kv_.second; }
    const Value& value() const { return kv_.second; }
    Value& operator*() { return kv_.second; }
    Value* operator->() { return &kv_.second; }
    const std::pair<Key, Value>& pair() const { return kv_; }

   private:
    std::pair<Key, Value> kv_;
  };
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  explicit OrderedDict(std::string key_description)
      : key_description_(std::move(key_description)) {}

  // Adds an entry; a key that is already present is an error.
  Value& insert(Key key, Value value) {
    if (index_.count(key))
      throw_error("[OrderedDict] {} '{}' already defined", key_description_, key);
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().value();
  }
  // Adds or replaces an entry (order kept when replacing).
  Value& insert_or_assign(Key key, Value value) {
    auto it = index_.find(key);
    if (it != index_.end()) return items_[it->second].value() = std::move(value);
    return insert(std::move(key), std::move(value));
  }
  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  const Value* find(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  bool contains(const Key& key) const { return index_.count(key) != 0; }
  Value& operator[](const Key& key) {
    if (Value* v = find(key)) return *v;
    throw_error("[OrderedDict] {} '{}' is not defined", key_description_, key);
  }
  const Value& operator[](const Key& key) const {
    if (const Value* v = find(key)) return *v;
    throw_error("[OrderedDict] {} '{}' is not defined", key_description_, key);
  }
  Item& operator[](size_t i) { return items_.at(i); }
  const Item& operator[](size_t i) const { return items_.at(i); }
  size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }
  std::vector<Key> keys() const {
    std::vector<Key> k;
    for (const Item& i : items_) k.push_back(i.key());
    return k;
  }
  std::vector<Value> values() const {
    std::vector<Value> v;
    for (const Item& i : items_) v.push_back(i.value());
    return v;
  }
  const std::vector<Item>& items() const { return items_; }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

 private:
  std::string key_description_ = "key";
  std::vector<Item> items_;
  std::unordered_map<Key, size_t> index_;
};

}  // namespace oneflow
