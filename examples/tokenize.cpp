// tokenize: Hugging Face tokenizers from the command line, for scripts and checks.
//
//   build/examples/tokenize TOKENIZER_JSON [--no-special] [--offsets] [--pairs] [--threads N]
//   build/examples/tokenize TOKENIZER_JSON --decode [--skip-special]
//
// Reads UTF-8 text from standard input, one input per line (split on "\n" only: "\v", "\f",
// U+0085, U+2028, U+2029, U+FEFF and other controls inside a line are text), and prints one line
// per input: its ids separated by single spaces (nothing for an input that encodes to nothing).
// Each line is encoded whole: the file's own truncation and padding are not applied.
//   --no-special    add_special_tokens=false (no [CLS]/[SEP], no BOS)
//   --offsets       id:start:end per token, offsets in code points into the line (0:0 for a token
//                   the post-processor added)
//   --pairs         each line is first<TAB>second (a line without a tab: second empty)
//   --decode        lines of space-separated ids in, each line's text out
//   --skip-special  (with --decode) skip_special_tokens=true
//   --threads N     encode the lines on N threads (default 1); output in input order
// A missing, empty, truncated or malformed file, an unknown option or a malformed id line: a
// message on standard error and exit status 2.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "oneflow/error.h"
#include "oneflow/text.h"

namespace tx = oneflow::text;

namespace {

int usage(const std::string& why) {
  std::cerr << "tokenize: " << why << "\n"
            << "usage: tokenize TOKENIZER_JSON [--no-special] [--offsets] [--pairs] "
               "[--threads N]\n"
               "       tokenize TOKENIZER_JSON --decode [--skip-special]\n";
  return 2;
}

std::vector<std::string> read_lines() {
  std::string all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < all.size()) {
    const size_t nl = all.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(all.substr(start));
      break;
    }
    lines.push_back(all.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// The line's ids, or an error naming the line and the bad field.
std::vector<int64_t> parse_ids(const std::string& line, size_t lineno) {
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    size_t j = line.find(' ', i);
    if (j == std::string::npos) j = line.size();
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(line.data() + i, line.data() + j, v);
    if (ec != std::errc() || p != line.data() + j)
      oneflow::fail("line {}: '{}' is not an id", lineno, line.substr(i, j - i));
    ids.push_back(v);
    i = j;
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("no tokenizer.json given");
  bool special = true, offsets = false, pairs = false, decode = false, skip = false;
  int threads = 1;
  std::string path;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    if (a == "--no-special") special = false;
    else if (a == "--offsets") offsets = true;
    else if (a == "--pairs") pairs = true;
    else if (a == "--decode") decode = true;
    else if (a == "--skip-special") skip = true;
    else if (a == "--threads") {
      if (k + 1 >= argc) return usage("--threads needs a number");
      const std::string n = argv[++k];
      const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), threads);
      if (ec != std::errc() || p != n.data() + n.size() || threads < 1 || threads > 1024)
        return usage("--threads " + n + ": expected a number in [1, 1024]");
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option " + a);
    } else if (path.empty()) {
      path = a;
    } else {
      return usage("more than one tokenizer.json given (" + path + ", " + a + ")");
    }
  }
  if (path.empty()) return usage("no tokenizer.json given");
  if (skip && !decode) return usage("--skip-special goes with --decode");
  if (decode && (offsets || pairs || !special)) return usage("--decode takes only --skip-special");
  try {
    const tx::Tokenizer tok = tx::Tokenizer::from_file(path);
    const std::vector<std::string> lines = read_lines();
    std::vector<std::string> out(lines.size());
    auto one = [&](size_t i) {
      if (decode) {
        out[i] = tok.decode(parse_ids(lines[i], i + 1), skip);
        return;
      }
      tx::Encoding e;
      if (pairs) {
        const size_t tab = lines[i].find('\t');
        const std::string_view l = lines[i];
        e = tab == std::string::npos ? tok.encode(l, std::string_view(), special)
                                     : tok.encode(l.substr(0, tab), l.substr(tab + 1), special);
      } else {
        e = tok.encode(lines[i], special);
      }
      std::string& s = out[i];
      for (size_t k = 0; k < e.size(); ++k) {
        if (k) s += ' ';
        s += std::to_string(e.ids[k]);
        if (offsets)
          s += ':' + std::to_string(e.offsets[k].first) + ':' + std::to_string(e.offsets[k].second);
      }
    };
    const size_t t = std::min<size_t>(size_t(threads), std::max<size_t>(lines.size(), 1));
    std::vector<std::string> errors(t);
    std::vector<std::thread> pool;
    for (size_t w = 0; w < t; ++w)
      pool.emplace_back([&, w] {
        try {
          for (size_t i = lines.size() * w / t; i < lines.size() * (w + 1) / t; ++i) one(i);
        } catch (const std::exception& ex) { errors[w] = ex.what(); }
      });
    for (std::thread& th : pool) th.join();
    for (const std::string& e : errors)
      if (!e.empty()) {
        std::cerr << "tokenize: " << e << "\n";
        return 2;
      }
    std::string all;
    for (const std::string& s : out) {
      all += s;
      all += '\n';
    }
    std::fwrite(all.data(), 1, all.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const std::exception& ex) {
    std::cerr << "tokenize: " << ex.what() << "\n";
    return 2;
  }
}
