// batch.cpp: what HF's Encoding does between the model and the batch tensors — merging sequences
// (overflowing windows crossed as Encoding::merge_with crosses them), truncation into windows,
// padding — and the batch itself as int64 tensors.
#include <algorithm>

#include "oneflow/ops.h"
#include "text/pipeline.h"

namespace oneflow::text {

namespace {

void cat(Encoding& e, const Encoding& x) {
  auto c = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  c(e.ids, x.ids);
  c(e.tokens, x.tokens);
  c(e.type_ids, x.type_ids);
  c(e.attention_mask, x.attention_mask);
  c(e.special_tokens_mask, x.special_tokens_mask);
  c(e.offsets, x.offsets);
}

Encoding slice(const Encoding& e, size_t b, size_t f) {
  Encoding s;
  auto c = [&](auto& a, const auto& v) { a.assign(v.begin() + long(b), v.begin() + long(f)); };
  c(s.ids, e.ids);
  c(s.tokens, e.tokens);
  c(s.type_ids, e.type_ids);
  c(s.attention_mask, e.attention_mask);
  c(s.special_tokens_mask, e.special_tokens_mask);
  c(s.offsets, e.offsets);
  return s;
}

// NOTE [Tokenizer row bound]: HF's merge crosses the overflowing windows of a pair's two sides
// and nests them (each window of the first merged with the whole second, windows included), so a
// pair truncated to a short max_length with a stride near it holds a number of tokens cubic in its
// length; a stride of max_length - 1 over a single long input holds windows x max_length; a
// padding length pads every window. HF builds all of it (a few KB of text can ask for gigabytes).
// Here each of the three first counts what it would make, one cell per token and per encoding,
// and refuses past kMaxRowCells (1,048,576: ~100 MB of Encoding) with an of::Error, allocating
// nothing; real windows (a long document at max_length 512 with stride 128) stay far below.

// The cells of `e` and its windows.
size_t cells(const Encoding& e) {
  size_t n = e.size() + 1;
  for (const Encoding& o : e.overflowing) n += cells(o);
  return n;
}
size_t encodings(const Encoding& e) {
  size_t n = 1;
  for (const Encoding& o : e.overflowing) n += encodings(o);
  return n;
}

// The cells of `e` padded to `length` (length at most kMaxRowCells: no overflow).
size_t padded_cells(const Encoding& e, size_t length) {
  size_t n = std::max(e.size(), length) + 1;
  for (const Encoding& o : e.overflowing) n += padded_cells(o, length);
  return n;
}

// The cells merge(s, p) would hold, or a number over `cap` as soon as the count passes it.
size_t merged_cells(const Encoding& s, const Encoding& p, size_t cap) {
  size_t n = s.size() + p.size() + 1;
  for (const Encoding& so : s.overflowing) {
    if ((n += merged_cells(so, p, cap)) > cap) return n;
    for (const Encoding& po : p.overflowing)
      if ((n += merged_cells(so, po, cap)) > cap) return n;
  }
  for (const Encoding& po : p.overflowing)
    if ((n += merged_cells(s, po, cap)) > cap) return n;
  return n;
}

void merge_unchecked(Encoding& self, const Encoding& pair) {
  std::vector<Encoding> over;
  for (const Encoding& so : self.overflowing) {
    Encoding n = so;
    merge_unchecked(n, pair);
    over.push_back(std::move(n));
    for (const Encoding& po : pair.overflowing) {
      Encoding m = so;
      merge_unchecked(m, po);
      over.push_back(std::move(m));
    }
  }
  for (const Encoding& po : pair.overflowing) {
    Encoding n = self;  // (its own windows too: HF nests them so)
    merge_unchecked(n, po);
    over.push_back(std::move(n));
  }
  cat(self, pair);
  self.overflowing = std::move(over);
}

}  // namespace

void merge_into(Encoding& self, const Encoding& pair) {
  if (merged_cells(self, pair, kMaxRowCells) > kMaxRowCells)
    fail(
        "[tokenizer] truncation: the overflowing windows of this pair, crossed as HF crosses them "
        "({} and {} windows, nested), would hold more than {} tokens and encodings: truncate one "
        "side only (only_first / only_second), or take a smaller stride or a longer max_length",
        encodings(self) - 1, encodings(pair) - 1, kMaxRowCells);
  merge_unchecked(self, pair);
}

void truncate(Encoding& e, size_t max_len, size_t stride, Side direction) {
  const size_t n = e.size();
  if (max_len >= n) return;
  if (max_len == 0) {
    Encoding all = std::move(e);
    e = Encoding();
    e.overflowing.push_back(std::move(all));
    return;
  }
  if (stride >= max_len)
    fail("[tokenizer] truncation: the stride {} must be under the length {} a sequence is cut to",
         stride, max_len);
  const size_t step = max_len - stride;
  std::vector<std::pair<size_t, size_t>> parts;
  if (direction == Side::kRight) {
    for (size_t start = 0; start < n; start += step) {
      const size_t stop = std::min(start + max_len, n);
      parts.push_back({start, stop});
      if (stop == n) break;
    }
  } else {
    for (size_t k = n; k-- > 0;) {
      if ((n - 1 - k) % step != 0) continue;
      const size_t stop = k + 1, start = stop > max_len ? stop - max_len : 0;
      parts.push_back({start, stop});
      if (start == 0) break;
    }
  }
  size_t total = 0;
  for (const auto& [b, f] : parts) total += f - b + 1;
  if (total > kMaxRowCells)
    fail(
        "[tokenizer] truncation: {} tokens cut to {} with stride {} make {} windows holding {} "
        "tokens in all, more than the {} a row may hold: take a smaller stride",
        n, max_len, stride, parts.size(), total - parts.size(), kMaxRowCells);
  Encoding kept = slice(e, parts[0].first, parts[0].second);
  for (size_t k = 1; k < parts.size(); ++k)
    kept.overflowing.push_back(slice(e, parts[k].first, parts[k].second));
  e = std::move(kept);
}

void truncate_pair(Encoding& a, Encoding* b, const Truncation& t, size_t max_length) {
  const size_t stride = size_t(t.stride);
  if (max_length == 0) {
    truncate(a, 0, stride, t.direction);
    if (b) truncate(*b, 0, stride, t.direction);
    return;
  }
  const size_t total = a.size() + (b ? b->size() : 0);
  if (total <= max_length) return;
  const size_t to_remove = total - max_length;
  if (t.strategy == Truncation::kLongestFirst) {
    if (!b) return truncate(a, total - to_remove, stride, t.direction);
    size_t n1 = a.size(), n2 = b->size();
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
    if (n1 + n2 > max_length) {
      n1 = max_length / 2;
      n2 = n1 + max_length % 2;
    }
    if (swap) std::swap(n1, n2);
    truncate(a, n1, stride, t.direction);
    truncate(*b, n2, stride, t.direction);
    return;
  }
  Encoding* target = t.strategy == Truncation::kOnlyFirst ? &a : b;
  if (!target) fail("[tokenizer] truncation only_second: the input is not a pair");
  if (target->size() <= to_remove)
    fail(
        "[tokenizer] truncation {}: the sequence has {} tokens, too few to take {} away and fit "
        "max_length {}",
        t.strategy == Truncation::kOnlyFirst ? "only_first" : "only_second", target->size(),
        to_remove, max_length);
  truncate(*target, target->size() - to_remove, stride, t.direction);
}

namespace {
void pad_unchecked(Encoding& e, size_t length, int64_t pad_id, int64_t pad_type_id,
                   const std::string& pad_token, Side direction) {
  for (Encoding& o : e.overflowing)
    pad_unchecked(o, length, pad_id, pad_type_id, pad_token, direction);
  if (e.size() >= length) return;
  const size_t k = length - e.size();
  auto put = [&](auto& v, const auto& x) {
    if (direction == Side::kRight) v.insert(v.end(), k, x);
    else v.insert(v.begin(), k, x);
  };
  put(e.ids, pad_id);
  put(e.type_ids, pad_type_id);
  put(e.tokens, pad_token);
  put(e.attention_mask, int64_t(0));
  put(e.special_tokens_mask, int64_t(1));
  put(e.offsets, Span{0, 0});
}
}  // namespace

void pad(Encoding& e, size_t length, int64_t pad_id, int64_t pad_type_id,
         const std::string& pad_token, Side direction) {
  if (length > kMaxRowCells || padded_cells(e, length) > kMaxRowCells)
    fail(
        "[tokenizer] padding: {} tokens for each of a row's {} encodings (with its overflowing "
        "windows) is more than the {} a row may hold",
        length, encodings(e), kMaxRowCells);
  pad_unchecked(e, length, pad_id, pad_type_id, pad_token, direction);
}

Batch to_batch(std::vector<Encoding> encs, const std::optional<Padding>& padding) {
  Batch b;
  const int64_t rows = int64_t(encs.size());
  const size_t seq = encs.empty() ? 0 : encs[0].size();
  for (size_t r = 0; r < encs.size(); ++r)
    if (encs[r].size() != seq)
      fail(
          "[tokenizer] encode_batch: row {} has {} tokens and row 0 {}: the rows make no "
          "rectangle ({})",
          r, encs[r].size(), seq,
          padding ? "a fixed padding length under a row's: truncate to it too"
                  : "pad them: EncodeOptions::padding");
  std::vector<int64_t> ids, mask, types;
  ids.reserve(size_t(rows) * seq);
  for (const Encoding& e : encs) {
    ids.insert(ids.end(), e.ids.begin(), e.ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
    types.insert(types.end(), e.type_ids.begin(), e.type_ids.end());
  }
  const std::vector<int64_t> shape{rows, int64_t(seq)};
  b.input_ids = oneflow::tensor(ids, shape);
  b.attention_mask = oneflow::tensor(mask, shape);
  b.token_type_ids = oneflow::tensor(types, shape);
  b.encodings = std::move(encs);
  return b;
}

}  // namespace oneflow::text
