// bench_tokenize: encoding throughput of of::text::Tokenizer on a corpus of real text, one input
// per line (bench/tokenize.sh writes the corpus and runs HF `tokenizers` beside it).
//
//   build/bench/bench_tokenize TOKENIZER_JSON CORPUS [rounds, default 5] [threads, default "1 2"]
//
// Prints, per mode, the median over rounds of tokens per second (special tokens included):
//   single   encode() per line in a loop, one thread
//   batch N  encode_all of every line (encode_batch's rows, no padding) on N threads
// as lines "ours MODE TOKENS_PER_S TOKENS LINES" for the script to read. Without arguments (as
// `./run bench` calls every bench binary) it says what it needs and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "oneflow/text.h"

namespace tx = oneflow::text;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::printf(
        "bench_tokenize: needs TOKENIZER_JSON CORPUS (bench/tokenize.sh runs it beside HF "
        "tokenizers): skipped\n");
    return 0;
  }
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  std::vector<int> threads = {1, 2};
  if (argc > 4) {
    threads.clear();
    std::istringstream ts(argv[4]);
    for (int t; ts >> t;) threads.push_back(t);
  }
  const tx::Tokenizer tok = tx::Tokenizer::from_file(argv[1]);
  std::vector<std::string> lines;
  {
    std::ifstream in(argv[2], std::ios::binary);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto clock = [] { return std::chrono::steady_clock::now(); };
  size_t tokens = 0;
  for (const std::string& l : lines) tokens += tok.encode(l).size();  // (and a warm-up)
  {
    std::vector<double> rate;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = clock();
      size_t n = 0;
      for (const std::string& l : lines) n += tok.encode(l).size();
      rate.push_back(double(n) / std::chrono::duration<double>(clock() - t0).count());
    }
    std::printf("ours single %.0f %zu %zu\n", median(rate), tokens, lines.size());
  }
  for (int t : threads) {
    tx::EncodeOptions o;
    o.threads = t;
    std::vector<double> rate;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = clock();
      const std::vector<tx::Encoding> e = tok.encode_all(lines, o);
      size_t n = 0;
      for (const tx::Encoding& x : e) n += x.size();
      rate.push_back(double(n) / std::chrono::duration<double>(clock() - t0).count());
    }
    std::printf("ours batch%d %.0f %zu %zu\n", t, median(rate), tokens, lines.size());
  }
  return 0;
}
