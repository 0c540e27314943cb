#!/usr/bin/env python3
"""NOTE [Tokenizer Unicode]: what Hugging Face's BERT normalizer and pre-tokenizer say about every
code point, for tests/test_text.cpp to compare with src/text/unicode.cpp.

usage: probe_unicode.py OUT

One line per code point (surrogates skipped): "cp clean lower strip split chinese", where clean is
0 (kept), 1 (removed by clean_text) or 2 (made a space); lower and strip are the code points
(hex, '.'-joined, '-' for none) that lowercase and strip_accents make of the character alone; split
is 0 (joined to its neighbours), 1 (a word of its own: punctuation) or 2 (a separator: whitespace)
as BertPreTokenizer splits "a<c>b"; chinese is 1 when handle_chinese_chars pads it with spaces.
"""
import sys

from tokenizers import normalizers, pre_tokenizers


def main():
    off = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    clean = normalizers.BertNormalizer(**{**off, "clean_text": True})
    lower = normalizers.BertNormalizer(**{**off, "lowercase": True})
    strip = normalizers.BertNormalizer(**{**off, "strip_accents": True})
    chinese = normalizers.BertNormalizer(**{**off, "handle_chinese_chars": True})
    pre = pre_tokenizers.BertPreTokenizer()
    hexs = lambda s: ".".join(f"{ord(x):x}" for x in s) or "-"
    with open(sys.argv[1], "w") as out:
        for cp in range(0x110000):
            if 0xD800 <= cp < 0xE000:
                continue
            c = chr(cp)
            n = clean.normalize_str("a" + c + "b")
            cl = 1 if n == "ab" else 2 if n == "a b" and c != " " else 0
            pieces = [p for p, _ in pre.pre_tokenize_str("a" + c + "b")]
            sp = 2 if pieces == ["a", "b"] else 1 if pieces == ["a", c, "b"] else 0
            ch = 1 if chinese.normalize_str(c) == " " + c + " " else 0
            out.write(f"{cp:x} {cl} {hexs(lower.normalize_str(c))} {hexs(strip.normalize_str(c))} {sp} {ch}\n")


if __name__ == "__main__":
    main()
